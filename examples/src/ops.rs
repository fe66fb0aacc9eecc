//! The demo's operator endpoints (`--listen ADDR`): `/metrics` (Prometheus text from a
//! `prometheus-client` registry), `/healthz` and `/readyz` (each a [`HealthChecks`] list: 200
//! when every check passes, 503 otherwise, the body naming each check).
//!
//! The kcache crates serve nothing; this is the program's own small server, on `tiny_http` (a
//! synchronous server with a handful of small dependencies: one thread answers the requests, so
//! the demo's tokio runtime is not involved and no async HTTP stack is compiled for it).

use kcache_core::health::HealthChecks;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The content type of `prometheus-client`'s text encoding (OpenMetrics).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the endpoints answer from: the metrics registry and the two lists of checks.
pub struct Endpoints {
    metrics: Registry,
    healthz: HealthChecks,
    readyz: HealthChecks,
}

/// One answer: status code, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// 200, 404, 405, 500 or 503.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Answer {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }
}

impl Endpoints {
    /// Endpoints over `metrics`, with `healthz` behind `/healthz` (liveness: restart me when it
    /// fails) and `readyz` behind `/readyz` (readiness: do not count on me yet).
    pub fn new(metrics: Registry, healthz: HealthChecks, readyz: HealthChecks) -> Self {
        Self {
            metrics,
            healthz,
            readyz,
        }
    }

    /// The answer to `method path` (a query string is ignored).
    pub fn answer(&self, method: &str, path: &str) -> Answer {
        let path = path.split('?').next().unwrap_or(path);
        let checks = match path {
            "/metrics" => None,
            "/healthz" => Some(&self.healthz),
            "/readyz" => Some(&self.readyz),
            _ => return Answer::text(404, "not found: try /metrics, /healthz or /readyz\n"),
        };
        if method != "GET" {
            return Answer::text(405, "only GET\n");
        }
        match checks {
            Some(checks) => {
                let report = checks.check();
                Answer::text(if report.is_ok() { 200 } else { 503 }, report.to_string())
            }
            None => {
                let mut body = String::new();
                match encode(&mut body, &self.metrics) {
                    Ok(()) => Answer {
                        status: 200,
                        content_type: METRICS_CONTENT_TYPE,
                        body,
                    },
                    Err(e) => Answer::text(500, format!("cannot encode the metrics: {e}\n")),
                }
            }
        }
    }
}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoints")
            .field("healthz", &self.healthz)
            .field("readyz", &self.readyz)
            .finish_non_exhaustive()
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the server library said.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The bound address is not an IP address (cannot happen for a TCP listener).
    #[error("the server listens on something that is not an IP address")]
    NotIp,
    /// The serving thread could not start.
    #[error("cannot start the serving thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// A running server; dropping it (or [`stop`](Self::stop)) stops it and joins its thread.
pub struct OpsServer {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl OpsServer {
    /// Listens on `addr` (port 0: any free port; see [`local_addr`](Self::local_addr)) and
    /// answers from `endpoints` on a thread of its own.
    ///
    /// # Errors
    /// [`ServeError`] when the address cannot be bound or the thread cannot start.
    pub fn start(addr: SocketAddr, endpoints: Arc<Endpoints>) -> Result<Self, ServeError> {
        let server =
            tiny_http::Server::http(addr).map_err(|source| ServeError::Bind { addr, source })?;
        let bound = server.server_addr().to_ip().ok_or(ServeError::NotIp)?;
        let server = Arc::new(server);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("kcache-demo-ops".into())
            .spawn(move || serve(&serving, &endpoints))?;
        Ok(Self {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and joins the thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for OpsServer {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl fmt::Debug for OpsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Answers requests one at a time until the server is unblocked.
fn serve(server: &tiny_http::Server, endpoints: &Endpoints) {
    for request in server.incoming_requests() {
        let answer = endpoints.answer(request.method().as_str(), request.url());
        let mut response =
            tiny_http::Response::from_string(answer.body).with_status_code(answer.status);
        if let Ok(header) =
            tiny_http::Header::from_bytes(&b"Content-Type"[..], answer.content_type.as_bytes())
        {
            response = response.with_header(header);
        }
        // A client that went away is its own problem; the next request is served.
        let _ = request.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::health::CheckError;
    use prometheus_client::metrics::counter::Counter;

    fn endpoints(ready: bool) -> Endpoints {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        counter.inc();
        registry.register("demo_things", "Things", counter);
        Endpoints::new(
            registry,
            HealthChecks::new().with_fn("ping", || Ok(())),
            HealthChecks::new().with_fn("caches", move || {
                if ready {
                    Ok(())
                } else {
                    Err(CheckError::from("not synced yet"))
                }
            }),
        )
    }

    #[test]
    fn each_path_answers_with_its_status_and_body() {
        let e = endpoints(false);
        let readyz = e.answer("GET", "/readyz");
        assert_eq!(readyz.status, 503);
        assert_eq!(
            readyz.body,
            "[-]caches failed: not synced yet\ncheck failed\n"
        );
        assert_eq!(endpoints(true).answer("GET", "/readyz?verbose").status, 200);
        let healthz = e.answer("GET", "/healthz");
        assert_eq!(
            (healthz.status, healthz.body.as_str()),
            (200, "[+]ping ok\ncheck passed\n")
        );
        let metrics = e.answer("GET", "/metrics");
        assert_eq!(metrics.status, 200);
        assert_eq!(metrics.content_type, METRICS_CONTENT_TYPE);
        assert!(metrics.body.contains("demo_things_total 1\n"));
        assert_eq!(e.answer("GET", "/").status, 404);
        assert_eq!(e.answer("POST", "/healthz").status, 405);
    }
}
