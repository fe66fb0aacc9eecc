//! A loopback Kubernetes list/watch server for ConfigMaps, backed by kcache-memory.
//!
//! A hand-written HTTP/1.1 server on `127.0.0.1:0` (one request per connection, `Connection:
//! close`), speaking the subset of the Kubernetes API that a reflector uses:
//!
//! Covered:
//! - `GET /api/v1/configmaps` (all namespaces) and `/api/v1/namespaces/{ns}/configmaps`.
//! - list: `limit`, `continue`, `resourceVersion`, `resourceVersionMatch` (the memory source's
//!   semantics: `""`/`"0"` current state, `NotOlderThan`, `Exact` from history); a `ConfigMapList`
//!   with `metadata.resourceVersion` and `metadata.continue`.
//! - watch (`watch=true|1`): a chunked stream of JSON lines `{"type":"ADDED|MODIFIED|DELETED|
//!   BOOKMARK|ERROR","object":...}`; `resourceVersion`, `timeoutSeconds` (the stream ends cleanly),
//!   `allowWatchBookmarks`, `sendInitialEvents=true` (initial `ADDED`s then a `BOOKMARK` annotated
//!   `k8s.io/initial-events-end: "true"`).
//! - errors as `Status` objects: a watch from a compacted version (and an evicted slow watcher)
//!   gets HTTP 200 and an `ERROR` event with code 410 reason `Expired`; a list from a compacted
//!   version or continue token gets HTTP 410; a too-large version gets HTTP 504 reason `Timeout`
//!   "Too large resource version" with cause `ResourceVersionTooLarge`; unknown paths 404.
//! - label selectors of the form `k=v[,k2=v2]` and field selectors `metadata.name=`,
//!   `metadata.namespace=`, applied to list items and watch events.
//! - test knobs: answer the next N requests with 429, expire the next N watches (ERROR 410), push
//!   raw lines into every open watch, hold new watches, close every open watch, corrupt the next
//!   N lists; a log of every request's path and query.
//!
//! Leases (`coordination.k8s.io/v1`: get, create, replace with 409 on conflict) are served from a
//! store of their own, for kcache-kube's `LeaseLock`: see the `leases` module.
//!
//! Not covered: TLS, authentication, keep-alive, HTTP/2, gzip, protobuf and Table encodings, any
//! verb but GET on ConfigMaps (writes go to the `MemorySource` directly), other resource kinds, `!=`/set-based
//! label selectors, an object leaving a selector becoming a `DELETED` event, the server-side
//! watch cache (`resourceVersion=0` lists are served from the source like any other), `Retry-After`
//! headers, and the 3-second wait a real server makes before refusing a too-large version.

#![allow(dead_code, reason = "each test file uses a part of the support module")]
#![allow(unreachable_pub, reason = "a test support module")]

mod leases;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kcache_kube::KubeMeta;
use kcache_memory::{MemoryConfig, MemoryError, MemorySource, MetaMut};
use kcache_reflector::{ListOptions, ListWatcher, ResourceVersionMatch, WatchEvent, WatchOptions};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};

/// The server's accessor: kcache-kube's `KubeMeta`, plus writing the version into `metadata`.
#[derive(Debug, Clone, Copy)]
pub struct ServerMeta;

impl Meta<ConfigMap> for ServerMeta {
    fn key(obj: &ConfigMap) -> Result<ObjectKey, KeyError> {
        KubeMeta::key(obj)
    }
    fn resource_version(obj: &ConfigMap) -> ResourceVersion {
        KubeMeta::resource_version(obj)
    }
}

impl MetaMut<ConfigMap> for ServerMeta {
    fn set_resource_version(obj: &mut ConfigMap, rv: ResourceVersion) {
        obj.metadata.resource_version = Some(rv.as_str().to_owned());
    }
}

/// The source the server serves.
pub type Source = MemorySource<ConfigMap, ServerMeta>;

#[derive(Clone, Debug)]
enum Control {
    Line(String),
    Close,
}

struct State {
    source: Source,
    throttle: AtomicU32,
    expire_watches: AtomicU32,
    corrupt_lists: AtomicU32,
    control: broadcast::Sender<Control>,
    hold: watch::Sender<bool>,
    log: Mutex<Vec<String>>,
    leases: leases::Leases,
}

/// A running loopback server; dropping it stops accepting connections.
pub struct Loopback {
    state: Arc<State>,
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Loopback {
    /// Starts a server over a new source with `config` (call inside a tokio runtime).
    pub async fn start(config: MemoryConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (control, _) = broadcast::channel(1024);
        let state = Arc::new(State {
            source: Source::with_config(config),
            throttle: AtomicU32::new(0),
            expire_watches: AtomicU32::new(0),
            corrupt_lists: AtomicU32::new(0),
            control,
            hold: watch::Sender::new(false),
            log: Mutex::new(Vec::new()),
            leases: leases::Leases::default(),
        });
        let st = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(st.clone(), socket));
            }
        });
        Ok(Self {
            state,
            addr,
            accept,
        })
    }

    /// The source behind the server: write to it to change what the server serves.
    pub fn source(&self) -> &Source {
        &self.state.source
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client pointed at this server, with kube-rs' own retries off (the reflector retries).
    pub fn client(&self) -> kube::Client {
        let uri = self.url().parse().expect("a loopback URL is a valid URI");
        let mut config = kube::Config::new(uri);
        config.default_retry = false;
        kube::Client::try_from(config).expect("an http:// client needs no TLS")
    }

    /// Answers the next `n` requests with HTTP 429.
    pub fn throttle_next(&self, n: u32) {
        self.state.throttle.store(n, Ordering::SeqCst);
    }

    /// Answers the next `n` watch requests with an `ERROR` 410 event.
    pub fn expire_next_watches(&self, n: u32) {
        self.state.expire_watches.store(n, Ordering::SeqCst);
    }

    /// Makes the first item of the next `n` list responses undecodable (`data` becomes a number).
    pub fn corrupt_next_lists(&self, n: u32) {
        self.state.corrupt_lists.store(n, Ordering::SeqCst);
    }

    /// Sends `line` as-is into every open watch stream.
    pub fn push_raw_line(&self, line: &str) {
        let _ = self.state.control.send(Control::Line(line.to_owned()));
    }

    /// Ends every open watch stream (cleanly, with the terminating chunk).
    pub fn close_watches(&self) {
        let _ = self.state.control.send(Control::Close);
    }

    /// While held, new watch requests wait before being served.
    pub fn hold_watches(&self, on: bool) {
        self.state.hold.send_replace(on);
    }

    /// Number of open watch streams (receivers of the control channel).
    pub fn open_watches(&self) -> usize {
        self.state.control.receiver_count()
    }

    /// Answers every Lease request with 503 (`false`), or serves them again (`true`).
    pub fn set_leases_available(&self, available: bool) {
        self.state.leases.set_available(available);
    }

    /// The stored Lease `ns/name`, as JSON.
    pub fn lease(&self, ns: &str, name: &str) -> Option<Value> {
        self.state.leases.get(ns, name)
    }

    /// Every request target (`path?query`) served so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// A ConfigMap in `ns` named `name` with one data entry.
pub fn config_map(ns: &str, name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some(ns.to_owned());
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some(BTreeMap::from([("v".to_owned(), value.to_owned())]));
    cm
}

// ---------------------------------------------------------------------------------------------

struct Req {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Req {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }
}

async fn serve(state: Arc<State>, mut socket: TcpStream) {
    let Some(req) = read_head(&mut socket).await else {
        return;
    };
    let _ = handle(&state, req, socket).await;
}

async fn read_head(socket: &mut TcpStream) -> Option<Req> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > 64 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut first = head.lines().next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    if length > 1 << 20 {
        return None;
    }
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    Some(Req {
        method,
        path: path.to_owned(),
        query,
        body,
    })
}

/// `application/x-www-form-urlencoded` decoding.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn take(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn error_status(e: &MemoryError) -> (u16, Value) {
    match e {
        MemoryError::Expired { .. } | MemoryError::Evicted { .. } => (
            410,
            status(410, "Expired", &format!("too old resource version: {e}")),
        ),
        MemoryError::TooLargeResourceVersion { requested, current } => {
            let mut s = status(
                504,
                "Timeout",
                &format!("Too large resource version: {requested}, current: {current}"),
            );
            s["details"] = json!({"causes": [{"reason": "ResourceVersionTooLarge",
                "message": "Too large resource version"}], "retryAfterSeconds": 1});
            (504, s)
        }
        other => (400, status(400, "BadRequest", &other.to_string())),
    }
}

async fn respond(socket: &mut TcpStream, code: u16, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

async fn chunk(socket: &mut TcpStream, line: &str) -> std::io::Result<()> {
    let data = format!("{:x}\r\n{line}\n\r\n", line.len() + 1);
    socket.write_all(data.as_bytes()).await?;
    socket.flush().await
}

/// Which namespace the path names (`Some(None)`: all namespaces; `None`: not a ConfigMap path).
fn route(path: &str) -> Option<Option<String>> {
    if path == "/api/v1/configmaps" {
        return Some(None);
    }
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, tail) = rest.split_once('/')?;
    (tail == "configmaps" && !ns.is_empty()).then(|| Some(ns.to_owned()))
}

struct Filter {
    namespace: Option<String>,
    labels: Vec<(String, String)>,
    fields: Vec<(String, String)>,
}

impl Filter {
    fn new(namespace: Option<String>, req: &Req) -> Self {
        let pairs = |s: Option<&str>| {
            s.unwrap_or("")
                .split(',')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim_end_matches('=').to_owned(), v.to_owned()))
                .collect()
        };
        Self {
            namespace,
            labels: pairs(req.q("labelSelector")),
            fields: pairs(req.q("fieldSelector")),
        }
    }

    fn matches(&self, cm: &ConfigMap) -> bool {
        let m = &cm.metadata;
        let ns = m.namespace.as_deref().unwrap_or("");
        if self.namespace.as_deref().is_some_and(|n| n != ns) {
            return false;
        }
        let labels = m.labels.clone().unwrap_or_default();
        let label_ok = self
            .labels
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|l| l == v));
        let field_ok = self.fields.iter().all(|(k, v)| match k.as_str() {
            "metadata.name" => m.name.as_deref() == Some(v.as_str()),
            "metadata.namespace" => ns == v,
            _ => false,
        });
        label_ok && field_ok
    }
}

async fn handle(state: &State, req: Req, mut socket: TcpStream) -> std::io::Result<()> {
    let target = format!(
        "{}?{}",
        req.path,
        req.query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    );
    if let Ok(mut log) = state.log.lock() {
        log.push(target);
    }
    if take(&state.throttle) {
        let body = status(
            429,
            "TooManyRequests",
            "the server has received too many requests",
        );
        return respond(&mut socket, 429, &body).await;
    }
    if let Some((ns, name)) = leases::route(&req.path) {
        return state
            .leases
            .respond(&req, &ns, name.as_deref(), socket)
            .await;
    }
    let Some(namespace) = route(&req.path) else {
        return respond(
            &mut socket,
            404,
            &status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        )
        .await;
    };
    let filter = Filter::new(namespace, &req);
    if req.flag("watch") {
        watch_response(state, &req, &filter, socket).await
    } else {
        list_response(state, &req, &filter, socket).await
    }
}

async fn list_response(
    state: &State,
    req: &Req,
    filter: &Filter,
    mut socket: TcpStream,
) -> std::io::Result<()> {
    let opts = ListOptions {
        resource_version: ResourceVersion::from(req.q("resourceVersion").unwrap_or("")),
        resource_version_match: match req.q("resourceVersionMatch") {
            Some("Exact") => Some(ResourceVersionMatch::Exact),
            Some("NotOlderThan") => Some(ResourceVersionMatch::NotOlderThan),
            _ => None,
        },
        limit: req.q("limit").and_then(|l| l.parse().ok()),
        continue_token: req.q("continue").map(str::to_owned),
    };
    match state.source.list(&opts).await {
        Ok(page) => {
            let mut items: Vec<Value> = page
                .items
                .iter()
                .filter(|cm| filter.matches(cm))
                .map(|cm| serde_json::to_value(&**cm).unwrap_or(Value::Null))
                .collect();
            if take(&state.corrupt_lists) {
                if let Some(first) = items.first_mut() {
                    first["data"] = json!(7);
                }
            }
            let mut metadata = json!({"resourceVersion": page.resource_version.as_str()});
            if let Some(c) = page.continue_token {
                metadata["continue"] = json!(c);
            }
            let body = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                              "metadata": metadata, "items": items});
            respond(&mut socket, 200, &body).await
        }
        Err(e) => {
            let (code, body) = error_status(&e);
            respond(&mut socket, code, &body).await
        }
    }
}

fn event_line(kind: &str, object: &Value) -> String {
    json!({"type": kind, "object": object}).to_string()
}

async fn watch_response(
    state: &State,
    req: &Req,
    filter: &Filter,
    mut socket: TcpStream,
) -> std::io::Result<()> {
    let mut control = state.control.subscribe();
    let mut hold = state.hold.subscribe();
    let _ = hold.wait_for(|held| !held).await;
    let opts = WatchOptions {
        resource_version: ResourceVersion::from(req.q("resourceVersion").unwrap_or("")),
        timeout: req
            .q("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs),
        allow_bookmarks: req.flag("allowWatchBookmarks"),
        send_initial_events: req.flag("sendInitialEvents"),
    };
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if take(&state.expire_watches) {
        socket.write_all(head.as_bytes()).await?;
        let body = status(410, "Expired", "too old resource version (injected)");
        chunk(&mut socket, &event_line("ERROR", &body)).await?;
        return finish(&mut socket).await;
    }
    let mut events = match state.source.watch(&opts).await {
        Ok(events) => events,
        Err(e @ (MemoryError::Expired { .. } | MemoryError::Evicted { .. })) => {
            socket.write_all(head.as_bytes()).await?;
            let (_, body) = error_status(&e);
            chunk(&mut socket, &event_line("ERROR", &body)).await?;
            return finish(&mut socket).await;
        }
        Err(e) => {
            let (code, body) = error_status(&e);
            return respond(&mut socket, code, &body).await;
        }
    };
    socket.write_all(head.as_bytes()).await?;
    let (mut reader, mut writer) = socket.into_split();
    let mut probe = [0u8; 64];
    loop {
        let line = tokio::select! {
            ev = events.next() => match ev {
                None => break,
                Some(Ok(WatchEvent::Added(o))) if filter.matches(&o) => event_line("ADDED", &serde_json::to_value(&*o).unwrap_or(Value::Null)),
                Some(Ok(WatchEvent::Modified(o))) if filter.matches(&o) => event_line("MODIFIED", &serde_json::to_value(&*o).unwrap_or(Value::Null)),
                Some(Ok(WatchEvent::Deleted(o))) if filter.matches(&o) => event_line("DELETED", &serde_json::to_value(&*o).unwrap_or(Value::Null)),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    let mut meta = json!({"resourceVersion": b.resource_version.as_str()});
                    if b.initial_events_end {
                        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                    }
                    event_line("BOOKMARK", &json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta}))
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    let (_, body) = error_status(&e);
                    let line = event_line("ERROR", &body);
                    write_chunk(&mut writer, &line).await?;
                    break;
                }
            },
            c = control.recv() => match c {
                Ok(Control::Line(line)) => line,
                Ok(Control::Close) | Err(broadcast::error::RecvError::Closed) => break,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
            },
            n = reader.read(&mut probe) => match n {
                Ok(0) | Err(_) => return Ok(()), // the client went away
                Ok(_) => continue,
            },
        };
        write_chunk(&mut writer, &line).await?;
    }
    writer.write_all(b"0\r\n\r\n").await?;
    writer.shutdown().await
}

async fn write_chunk(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    line: &str,
) -> std::io::Result<()> {
    let data = format!("{:x}\r\n{line}\n\r\n", line.len() + 1);
    writer.write_all(data.as_bytes()).await?;
    writer.flush().await
}

async fn finish(socket: &mut TcpStream) -> std::io::Result<()> {
    socket.write_all(b"0\r\n\r\n").await?;
    socket.shutdown().await
}
