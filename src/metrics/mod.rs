//! (stub; replaced by the metrics module)
use crate::record::RequestRecord;
pub struct CollectorOptions {
    pub streaming: bool,
    pub use_server_token_count: bool,
    pub goodput: Vec<GoodputSlo>,
}
pub struct GoodputSlo {
    pub tag: String,
    pub threshold: f64,
}
pub fn parse_goodput(_spec: &str) -> Result<Vec<GoodputSlo>, String> {
    Ok(vec![])
}
pub struct Collector {
    n: u64,
}
pub struct MetricsSummary {
    pub n: u64,
}
impl Collector {
    pub fn new(
        _opts: CollectorOptions,
        _tokenizer: std::sync::Arc<crate::tokenizer::Tokenizer>,
        _clock: crate::clock::Clock,
        _jsonl_path: Option<&std::path::Path>,
    ) -> std::io::Result<Self> {
        Ok(Collector { n: 0 })
    }
    pub fn add(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        if record.phase == crate::record::Phase::Profiling {
            self.n += 1;
        }
        Ok(())
    }
    pub fn completed(&self) -> u64 {
        self.n
    }
    pub fn finish(self) -> std::io::Result<MetricsSummary> {
        Ok(MetricsSummary { n: self.n })
    }
}
impl MetricsSummary {
    pub fn request_count(&self) -> u64 {
        self.n
    }
}
