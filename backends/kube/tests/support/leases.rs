//! Leases (`coordination.k8s.io/v1`) on the loopback server, for kcache-kube's `LeaseLock`.
//!
//! Covered: `GET .../namespaces/{ns}/leases/{name}` (404 `NotFound` when absent), `POST
//! .../namespaces/{ns}/leases` (201; 409 `AlreadyExists`), `PUT .../leases/{name}` (200; 404 when
//! absent; 409 `Conflict` unless `metadata.resourceVersion` is the stored one). Every write
//! assigns the next resource version. A knob answers every Lease request with 503 (the server
//! unreachable, as far as the lock can tell).
//!
//! Also, for kcache-kube's `LeaseMembers`: `GET .../namespaces/{ns}/leases` (a list, with a
//! `labelSelector` of `k=v` pairs) and `DELETE .../leases/{name}` (404 when absent; 409 unless a
//! `preconditions.resourceVersion` in the body, if any, is the stored one).
//!
//! Not covered: watch, patch, `dryRun`, field validation, an empty
//! `resourceVersion` on PUT (an unconditional update on a real server: refused here, since the
//! lock always sends one), managed fields.

use super::{respond, status, Req};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::net::TcpStream;

const PREFIX: &str = "/apis/coordination.k8s.io/v1/namespaces/";

/// The stored Leases: (namespace, name) -> object.
#[derive(Default)]
pub(super) struct Leases {
    objects: Mutex<BTreeMap<(String, String), Value>>,
    next_version: AtomicU64,
    unavailable: AtomicBool,
}

/// `(namespace, Some(name))` for an item path, `(namespace, None)` for the collection.
pub(super) fn route(path: &str) -> Option<(String, Option<String>)> {
    let rest = path.strip_prefix(PREFIX)?;
    let (ns, tail) = rest.split_once('/')?;
    if ns.is_empty() {
        return None;
    }
    match tail.strip_prefix("leases") {
        Some("") => Some((ns.to_owned(), None)),
        Some(name) => {
            let name = name.strip_prefix('/')?;
            (!name.is_empty() && !name.contains('/'))
                .then(|| (ns.to_owned(), Some(name.to_owned())))
        }
        None => None,
    }
}

impl Leases {
    pub(super) fn set_available(&self, available: bool) {
        self.unavailable.store(!available, Ordering::SeqCst);
    }

    pub(super) fn get(&self, ns: &str, name: &str) -> Option<Value> {
        self.objects
            .lock()
            .ok()?
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned()
    }

    fn stamp(&self, mut obj: Value, ns: &str) -> Value {
        let rv = 1000 + self.next_version.fetch_add(1, Ordering::SeqCst);
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        obj["metadata"]["namespace"] = Value::String(ns.to_owned());
        obj["apiVersion"] = Value::String("coordination.k8s.io/v1".into());
        obj["kind"] = Value::String("Lease".into());
        obj
    }

    /// The answer to one Lease request: (HTTP code, body).
    fn answer(&self, req: &Req, ns: &str, name: Option<&str>) -> (u16, Value) {
        if self.unavailable.load(Ordering::SeqCst) {
            return (
                503,
                status(503, "ServiceUnavailable", "leases are unavailable"),
            );
        }
        let not_found = |name: &str| {
            (
                404,
                status(
                    404,
                    "NotFound",
                    &format!("leases.coordination.k8s.io \"{name}\" not found"),
                ),
            )
        };
        let Ok(mut objects) = self.objects.lock() else {
            return (500, status(500, "InternalError", "poisoned"));
        };
        match (req.method.as_str(), name) {
            ("GET", Some(name)) => match objects.get(&(ns.to_owned(), name.to_owned())) {
                Some(obj) => (200, obj.clone()),
                None => not_found(name),
            },
            ("POST", None) => {
                let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
                    return (400, status(400, "BadRequest", "the body is not JSON"));
                };
                let Some(name) = body["metadata"]["name"].as_str().map(str::to_owned) else {
                    return (422, status(422, "Invalid", "metadata.name is required"));
                };
                let key = (ns.to_owned(), name.clone());
                if objects.contains_key(&key) {
                    return (
                        409,
                        status(
                            409,
                            "AlreadyExists",
                            &format!("leases.coordination.k8s.io \"{name}\" already exists"),
                        ),
                    );
                }
                let obj = self.stamp(body, ns);
                objects.insert(key, obj.clone());
                (201, obj)
            }
            ("PUT", Some(name)) => {
                let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
                    return (400, status(400, "BadRequest", "the body is not JSON"));
                };
                let key = (ns.to_owned(), name.to_owned());
                let Some(stored) = objects.get(&key) else {
                    return not_found(name);
                };
                let sent = body["metadata"]["resourceVersion"].as_str();
                if sent.is_none() || sent != stored["metadata"]["resourceVersion"].as_str() {
                    return (
                        409,
                        status(409, "Conflict", &format!("Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again")),
                    );
                }
                let obj = self.stamp(body, ns);
                objects.insert(key, obj.clone());
                (200, obj)
            }
            ("GET", None) => {
                let wanted: Vec<(&str, &str)> = req
                    .q("labelSelector")
                    .unwrap_or_default()
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .filter_map(|p| p.split_once('='))
                    .collect();
                let items: Vec<Value> = objects
                    .iter()
                    .filter(|((n, _), _)| n == ns)
                    .filter(|(_, obj)| {
                        wanted
                            .iter()
                            .all(|(k, v)| obj["metadata"]["labels"][*k].as_str() == Some(*v))
                    })
                    .map(|(_, obj)| obj.clone())
                    .collect();
                let rv = (1000 + self.next_version.load(Ordering::SeqCst)).to_string();
                (
                    200,
                    serde_json::json!({
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "LeaseList",
                        "metadata": {"resourceVersion": rv},
                        "items": items,
                    }),
                )
            }
            ("DELETE", Some(name)) => {
                let key = (ns.to_owned(), name.to_owned());
                let Some(stored) = objects.get(&key) else {
                    return not_found(name);
                };
                let body = serde_json::from_slice::<Value>(&req.body).unwrap_or(Value::Null);
                if let Some(want) = body["preconditions"]["resourceVersion"].as_str() {
                    if Some(want) != stored["metadata"]["resourceVersion"].as_str() {
                        return (
                            409,
                            status(409, "Conflict", &format!("Precondition failed for leases.coordination.k8s.io \"{name}\": the resourceVersion in the precondition does not match")),
                        );
                    }
                }
                let removed = objects.remove(&key).unwrap_or(Value::Null);
                (200, removed)
            }
            _ => (
                405,
                status(
                    405,
                    "MethodNotAllowed",
                    "not supported by the loopback server",
                ),
            ),
        }
    }

    pub(super) async fn respond(
        &self,
        req: &Req,
        ns: &str,
        name: Option<&str>,
        mut socket: TcpStream,
    ) -> std::io::Result<()> {
        let (code, body) = self.answer(req, ns, name);
        respond(&mut socket, code, &body).await
    }
}
