//! The HTTP side of the operations listener.

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

/// Whether the service can do its work, and if not, why.
pub type Readiness = Result<(), String>;

/// What the operations listener serves: the service's metrics and its readiness check.
#[derive(Clone)]
pub struct Ops {
    registry: Arc<Registry>,
    ready: Arc<dyn Fn() -> Readiness + Send + Sync>,
    /// Reads what the gauges show off the service's state, before each scrape.
    refresh: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops").finish_non_exhaustive()
    }
}

impl Ops {
    /// `registry` holds every metric the service registered; `ready` is asked on each
    /// `/readyz`.
    pub fn new(registry: Registry, ready: impl Fn() -> Readiness + Send + Sync + 'static) -> Self {
        Self {
            registry: Arc::new(registry),
            ready: Arc::new(ready),
            refresh: Arc::new(|| {}),
        }
    }

    /// `refresh` runs before each scrape (gauges read off the service's state).
    pub fn on_scrape(mut self, refresh: impl Fn() + Send + Sync + 'static) -> Self {
        self.refresh = Arc::new(refresh);
        self
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        (self.refresh)();
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "metrics could not be encoded");
        }
        text
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics))
            .with_state(self.clone())
    }
}

async fn readyz(State(ops): State<Ops>) -> Response {
    match (ops.ready)() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response(),
    }
}

async fn metrics(State(ops): State<Ops>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        ops.encode(),
    )
        .into_response()
}

/// Serves `ops` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    ops: Ops,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, ops.router())
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicBool, Ordering};

    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[tokio::test]
    async fn health_readiness_and_metrics_are_served() {
        let mut registry = Registry::with_prefix("skein");
        let requests: Counter = Counter::default();
        registry.register("requests", "Requests served", requests.clone());
        requests.inc_by(3);
        let ready = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ready);
        let ops = Ops::new(registry, move || {
            if flag.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("catching up".to_owned())
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, ops, async {
            let _ = stopped.await;
        }));

        let client = reqwest::Client::new();
        let get = |path: &str| client.get(format!("{base}{path}")).send();
        assert_eq!(get("/healthz").await.unwrap().status(), 200);
        let not_ready = get("/readyz").await.unwrap();
        assert_eq!(not_ready.status(), 503);
        assert!(not_ready.text().await.unwrap().contains("catching up"));
        ready.store(true, Ordering::Relaxed);
        assert_eq!(get("/readyz").await.unwrap().status(), 200);
        let text = get("/metrics").await.unwrap().text().await.unwrap();
        assert!(text.contains("skein_requests_total 3"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
