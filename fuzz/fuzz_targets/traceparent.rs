//! A `traceparent` as a client sends it in an HTTP header or a record header, to the parser
//! the gateway, the broker and the sinks use. It may refuse; it must never panic, and a
//! context it accepts names the trace and span the bytes spell out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opentelemetry::trace::TraceContextExt;

fuzz_target!(|data: &[u8]| {
    let Some(context) = skein_ops::telemetry::parse_traceparent(data) else {
        return;
    };
    assert!(data.len() <= skein_ops::telemetry::MAX_TRACEPARENT);
    let span = context.span();
    let ids = span.span_context();
    assert!(ids.is_valid());
    let text = String::from_utf8_lossy(data).to_ascii_lowercase();
    assert!(text.contains(&ids.trace_id().to_string()), "{text}");
    assert!(text.contains(&ids.span_id().to_string()), "{text}");
});
