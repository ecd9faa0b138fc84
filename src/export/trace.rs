//! `--export-http-trace`: the `trace_data` block of a `profile_export.jsonl` line, the
//! request's HTTP stamps as wall-clock ns and the phases they give.

use crate::clock::Clock;
use crate::record::RequestRecord;

/// How the stamps were taken (AIPerf names its transport here, e.g. "aiohttp").
const TRACE_TYPE: &str = "hyper";

fn push_field(out: &mut Vec<u8>, key: &str, value: u64) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = write!(out, ",\"{key}\":{value}");
}

/// Appends `,"trace_data":{...}` for a record whose response came on a connection.
/// Stamps that were not taken (no lookup or connect on a reused connection) are left out.
pub fn push_trace_data(out: &mut Vec<u8>, record: &RequestRecord, clock: &Clock) {
    let Some(h) = &record.http else {
        return;
    };
    out.extend_from_slice(b",\"trace_data\":{\"trace_type\":\"");
    out.extend_from_slice(TRACE_TYPE.as_bytes());
    out.push(b'"');
    let wall = |t: Option<u64>| t.map(|t| clock.wall_ns(t));
    let stamps = [
        ("request_send_start_ns", h.send_start_ns),
        ("request_send_end_ns", h.send_end_ns),
        ("response_headers_received_ns", h.headers_ns),
        ("response_receive_start_ns", h.first_body_ns),
        ("response_receive_end_ns", h.last_byte_ns),
        ("dns_lookup_start_ns", h.dns_start_ns),
        ("dns_lookup_end_ns", h.dns_end_ns),
        (
            "tcp_connect_start_ns",
            h.dns_end_ns
                .or(h.connect_start_ns)
                .filter(|_| h.connect_end_ns.is_some()),
        ),
        ("tcp_connect_end_ns", h.connect_end_ns),
    ];
    for (key, t) in stamps {
        if let Some(v) = wall(t) {
            push_field(out, key, v);
        }
    }
    if let Some(status) = record.status {
        push_field(out, "response_status_code", u64::from(status));
    }
    push_field(out, "request_chunks_count", h.chunks_sent);
    push_field(out, "request_bytes_total", h.bytes_sent);
    push_field(out, "response_chunks_count", h.chunks_received);
    push_field(out, "response_bytes_total", h.bytes_received);
    let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let durations = [
        ("sending_ns", span(h.send_start_ns, h.send_end_ns)),
        ("waiting_ns", span(h.send_end_ns, h.first_body_ns)),
        ("receiving_ns", span(h.first_body_ns, h.last_byte_ns)),
        ("duration_ns", span(h.send_start_ns, h.last_byte_ns)),
        ("dns_lookup_ns", span(h.dns_start_ns, h.dns_end_ns)),
        (
            "connecting_ns",
            span(h.dns_end_ns.or(h.connect_start_ns), h.connect_end_ns),
        ),
    ];
    for (key, d) in durations {
        if let Some(v) = d {
            push_field(out, key, v);
        }
    }
    if h.connection_reused
        && let Some(v) = wall(h.send_start_ns)
    {
        push_field(out, "connection_reused_ns", v);
    }
    out.push(b'}');
}
