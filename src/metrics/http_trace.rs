//! AIPerf's HTTP timing metrics (`http_req_*`, k6 names) from a record's connection stamps.
//!
//! Phases, each 0 when it did not happen (a reused connection has no lookup or connect):
//! blocked (exchange start to the connection's first step: lookup or connect of a new
//! connection, else the first byte written), dns_lookup, connecting (TCP and TLS),
//! sending (first to last request byte written), waiting (last request byte to first body
//! byte), receiving (first body byte to last byte). duration runs from the first request
//! byte to the last response byte; total is the sum of the six phases.

use super::catalog::MetricId as M;
use super::record_metrics::RecordMetrics;
use crate::record::RequestRecord;

/// `b - a` in ns, 0 when either is missing or `b` comes first.
fn span(a: Option<u64>, b: Option<u64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64,
        _ => 0.0,
    }
}

/// Sets the `http_req_*` metrics of `record`, when its response came on a connection.
pub(super) fn add(record: &RequestRecord, m: &mut RecordMetrics) {
    let Some(h) = &record.http else {
        return;
    };
    let start = Some(record.start_perf_ns);
    let first_step = h.dns_start_ns.or(h.connect_start_ns).or(h.send_start_ns);
    let blocked = span(start, first_step);
    let dns = span(h.dns_start_ns, h.dns_end_ns);
    let connecting = span(h.dns_end_ns.or(h.connect_start_ns), h.connect_end_ns);
    let sending = span(h.send_start_ns, h.send_end_ns);
    let waiting = span(h.send_end_ns, h.first_body_ns);
    let receiving = span(h.first_body_ns, h.last_byte_ns);
    let values = [
        (M::HttpReqBlocked, blocked),
        (M::HttpReqDnsLookup, dns),
        (M::HttpReqConnecting, connecting),
        (M::HttpReqSending, sending),
        (M::HttpReqWaiting, waiting),
        (M::HttpReqReceiving, receiving),
        (M::HttpReqDuration, span(h.send_start_ns, h.last_byte_ns)),
        (M::HttpReqConnectionOverhead, blocked + dns + connecting),
        (
            M::HttpReqTotal,
            blocked + dns + connecting + sending + waiting + receiving,
        ),
        (M::HttpReqDataSent, h.bytes_sent as f64),
        (M::HttpReqDataReceived, h.bytes_received as f64),
        (M::HttpReqChunksSent, h.chunks_sent as f64),
        (M::HttpReqChunksReceived, h.chunks_received as f64),
        (
            M::HttpReqConnectionReused,
            f64::from(u8::from(h.connection_reused)),
        ),
    ];
    for (id, v) in values {
        m.set(id, Some(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record_metrics::tests::streamed_record;
    use crate::record::HttpTiming;

    #[test]
    fn phases_follow_the_stamps_and_add_up() {
        let mut r = streamed_record(&[21, 26]);
        let s = r.start_perf_ns;
        r.http = Some(HttpTiming {
            connection_reused: false,
            dns_start_ns: Some(s + 100),
            dns_end_ns: Some(s + 300),
            connect_start_ns: Some(s + 50),
            connect_end_ns: Some(s + 1_000),
            send_start_ns: Some(s + 1_200),
            send_end_ns: Some(s + 1_500),
            headers_ns: Some(s + 2_000),
            first_body_ns: Some(s + 5_000),
            last_byte_ns: Some(s + 9_000),
            bytes_sent: 700,
            chunks_sent: 2,
            bytes_received: 4_000,
            chunks_received: 9,
        });
        let mut m = RecordMetrics::default();
        add(&r, &mut m);
        let v = |id| m.get(id).unwrap();
        assert_eq!(v(M::HttpReqBlocked), 100.0);
        assert_eq!(v(M::HttpReqDnsLookup), 200.0);
        assert_eq!(v(M::HttpReqConnecting), 700.0);
        assert_eq!(v(M::HttpReqSending), 300.0);
        assert_eq!(v(M::HttpReqWaiting), 3_500.0);
        assert_eq!(v(M::HttpReqReceiving), 4_000.0);
        assert_eq!(v(M::HttpReqDuration), 7_800.0);
        assert_eq!(v(M::HttpReqConnectionOverhead), 1_000.0);
        assert_eq!(v(M::HttpReqTotal), 8_800.0);
        assert_eq!(v(M::HttpReqDataSent), 700.0);
        assert_eq!(v(M::HttpReqChunksReceived), 9.0);
        assert_eq!(v(M::HttpReqConnectionReused), 0.0);

        // A reused connection: no lookup, no connect; blocked until the first write.
        r.http = Some(HttpTiming {
            connection_reused: true,
            send_start_ns: Some(s + 40),
            send_end_ns: Some(s + 60),
            first_body_ns: Some(s + 1_060),
            last_byte_ns: Some(s + 2_000),
            ..HttpTiming::default()
        });
        let mut m = RecordMetrics::default();
        add(&r, &mut m);
        let v = |id| m.get(id).unwrap();
        assert_eq!(v(M::HttpReqBlocked), 40.0);
        assert_eq!(v(M::HttpReqDnsLookup), 0.0);
        assert_eq!(v(M::HttpReqConnecting), 0.0);
        assert_eq!(v(M::HttpReqWaiting), 1_000.0);
        assert_eq!(v(M::HttpReqConnectionReused), 1.0);
        assert_eq!(v(M::HttpReqTotal), 2_000.0);
    }
}
