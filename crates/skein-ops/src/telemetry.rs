//! Traces: spans exported over OTLP (gRPC) when the standard `OTEL_*` variables ask for it,
//! and the W3C trace context (`traceparent`) that travels in record headers, so that a
//! record's trace runs from the request that wrote it through the broker that stored it to
//! the sink that applied it.
//!
//! Export is off unless `OTEL_TRACES_EXPORTER=otlp` or `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, and `OTEL_SDK_DISABLED=true` turns it off
//! whatever else is set. The exporter itself reads the endpoint, timeout and headers from
//! those variables, the batch processor its `OTEL_BSP_*` settings, and the resource
//! `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
//!
//! A `traceparent` a peer hands us (an HTTP header, a record header) is only read: at most
//! [`MAX_TRACEPARENT`] bytes, parsed by the W3C propagator, ignored when invalid.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C trace context header, in HTTP requests and in record headers.
pub const TRACEPARENT: &str = "traceparent";

/// The longest `traceparent` read (version 00 is 55 bytes; later versions may append).
pub const MAX_TRACEPARENT: usize = 256;

/// Records and links one span takes its context from at most, beyond its parent.
pub const MAX_LINKS: usize = 16;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported: the services carry trace context only then.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the OTLP trace exporter: {0}")]
    Exporter(String),
    #[error("a runtime for the exporter: {0}")]
    Runtime(#[from] std::io::Error),
}

/// The exporter while the process runs: dropping it sends what is left.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    /// The exporter's own threads, apart from the service's runtimes.
    _runtime: tokio::runtime::Runtime,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(error) = self.provider.force_flush() {
            eprintln!("skein: flushing spans: {error}");
        }
        if let Err(error) = self.provider.shutdown() {
            eprintln!("skein: stopping the span exporter: {error}");
        }
    }
}

/// The tracing layer that hands spans to the exporter.
pub type Layer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>;

/// Whether the environment asks for OTLP export.
pub fn requested() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled =
        std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let exporter = std::env::var("OTEL_TRACES_EXPORTER").unwrap_or_default();
    !disabled
        && exporter.trim() != "none"
        && (exporter.trim() == "otlp"
            || set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The tracing layer exporting spans, when the environment asks for it (see the module's
/// documentation); `service` names the process unless `OTEL_SERVICE_NAME` does.
pub fn layer<S>(service: &str) -> Result<Option<(Layer<S>, Telemetry)>, TelemetryError>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if !requested() {
        return Ok(None);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()?;
    let _entered = runtime.enter();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let resource = if std::env::var("OTEL_SERVICE_NAME").is_ok() {
        Resource::builder().build()
    } else {
        Resource::builder()
            .with_service_name(service.to_owned())
            .build()
    };
    // The batch processor exports from a thread of its own; the exporter's channel runs on
    // `runtime`, entered above when it was built.
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("skein");
    ENABLED.store(true, Ordering::Relaxed);
    Ok(Some((
        tracing_opentelemetry::layer().with_tracer(tracer),
        Telemetry {
            provider,
            _runtime: runtime,
        },
    )))
}

/// The context a `traceparent` value a peer sent names, if it is a valid one no longer than
/// [`MAX_TRACEPARENT`].
pub fn parse_traceparent(traceparent: &[u8]) -> Option<opentelemetry::Context> {
    if traceparent.len() > MAX_TRACEPARENT {
        return None;
    }
    let value = std::str::from_utf8(traceparent).ok()?.trim();
    if !w3c_shaped(value) {
        return None;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), value.to_owned())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    context.span().span_context().is_valid().then_some(context)
}

/// Whether `value` has the W3C shape: `version-traceid-parentid-flags` in lowercase hex of
/// 2, 32, 16 and 2 digits, version `ff` never, version `00` with nothing after the flags
/// (later versions may append `-` and more). The propagator alone also takes shorter ids.
fn w3c_shaped(value: &str) -> bool {
    let mut fields = value.splitn(5, '-');
    let lowercase_hex = |field: Option<&str>, digits: usize| {
        field.is_some_and(|f| {
            f.len() == digits
                && f.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    };
    let version = fields.next();
    let shaped = lowercase_hex(version, 2)
        && version != Some("ff")
        && lowercase_hex(fields.next(), 32)
        && lowercase_hex(fields.next(), 16)
        && lowercase_hex(fields.next(), 2);
    let rest = fields.next();
    shaped && (rest.is_none() || version != Some("00"))
}

/// The `traceparent` naming `span` as parent, while spans are exported and `span` is
/// recorded; `None` otherwise.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if !enabled() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of the first valid `traceparent` of `carried` and links it to the
/// next [`MAX_LINKS`] valid ones: a span over a batch of records written by several
/// requests. Does nothing while spans are not exported.
pub fn adopt<'a>(span: &tracing::Span, carried: impl IntoIterator<Item = &'a [u8]>) {
    if !enabled() {
        return;
    }
    let mut contexts = carried.into_iter().filter_map(parse_traceparent);
    let Some(parent) = contexts.next() else {
        return;
    };
    let parent_id = parent.span().span_context().span_id();
    // A span that is not recorded has no context to take a parent or links.
    if span.set_parent(parent).is_err() {
        return;
    }
    for context in contexts
        .filter(|c| c.span().span_context().span_id() != parent_id)
        .take(MAX_LINKS)
    {
        span.add_link(context.span().span_context().clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_valid_bounded_traceparent_names_a_context() {
        let good = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(good).expect("a valid traceparent");
        assert_eq!(
            context.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for bad in [
            &b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"[..],
            b"not a traceparent",
            b"4-8-4-8-4-- 8\0G",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"\xff\xfe",
            b"",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
        let mut long = good.to_vec();
        long.resize(MAX_TRACEPARENT + 1, b'0');
        assert!(parse_traceparent(&long).is_none());
    }
}
