//! One `/metrics` endpoint's scrapes, kept as they arrive in what the summaries need and no
//! more, so a run of hours holds about as much as a run of seconds:
//! - gauge samples, run-length encoded by scrape (`SampleRuns`): an idle gauge costs
//!   nothing per scrape, a changing one a few bytes;
//! - for counters and histograms, which are summarised as the change between a reference
//!   and a closing scrape, only those scrapes: each phase window pins the scrapes it will
//!   need (see `WindowPins`), and the last few scrapes are kept for a window declared late;
//! - per scrape, its time (8 bytes), and the times of those that changed.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use super::column::SampleRuns;
use super::server_metrics::{Window, is_kept};
use crate::scrape::{Family, Kind, ScrapeEvent, ScrapeSink, Value};

/// Scrapes kept beyond the pins, for a window start or end declared after the scrape that
/// decides it arrived (the scrape loop and the phases run on different threads).
const RECENT: usize = 3;

/// The phase windows the summaries are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Profiling,
}

/// A kept scrape: its first-byte time and families.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub at_ns: u64,
    pub families: Arc<Vec<Family>>,
}

/// The scrapes one window's summary reads, found as scrapes arrive: the last at or before
/// its start (reference), the first and last inside it, and the first at or after its end
/// (closing). Scrapes arrive in time order, so each choice is final once a later one came.
#[derive(Debug, Clone)]
pub(crate) struct WindowPins {
    pub window: Window,
    /// The end is known once the phase ended.
    pub ended: bool,
    pub reference: Option<Snapshot>,
    pub first_inside: Option<Snapshot>,
    pub last_inside: Option<Snapshot>,
    pub closing: Option<Snapshot>,
}

impl WindowPins {
    fn new(start_ns: u64) -> WindowPins {
        WindowPins {
            window: Window {
                start_ns,
                end_ns: u64::MAX,
            },
            ended: false,
            reference: None,
            first_inside: None,
            last_inside: None,
            closing: None,
        }
    }

    /// Takes in a scrape that arrived after every one offered before.
    fn offer(&mut self, s: &Snapshot) {
        let w = self.window;
        if s.at_ns <= w.start_ns {
            self.reference = Some(s.clone());
        }
        if s.at_ns >= w.start_ns && s.at_ns <= w.end_ns {
            if self.first_inside.is_none() {
                self.first_inside = Some(s.clone());
            }
            self.last_inside = Some(s.clone());
        }
        if self.ended && s.at_ns >= w.end_ns && self.closing.is_none() {
            self.closing = Some(s.clone());
        }
    }

    /// The end became known: a scrape already offered may lie after it.
    fn end(&mut self, end_ns: u64, recent: &VecDeque<Snapshot>) {
        self.window.end_ns = end_ns;
        self.ended = true;
        if self.last_inside.as_ref().is_some_and(|s| s.at_ns > end_ns) {
            self.last_inside = recent
                .iter()
                .rev()
                .find(|s| s.at_ns >= self.window.start_ns && s.at_ns <= end_ns)
                .cloned();
            if self.last_inside.is_none() {
                self.first_inside = None;
            }
        }
        self.closing = recent.iter().find(|s| s.at_ns >= end_ns).cloned();
    }

    /// The reference scrape: the last at or before the start, else the first inside.
    pub fn reference(&self) -> Option<&Snapshot> {
        self.reference.as_ref().or(self.first_inside.as_ref())
    }

    /// The closing scrape: the first at or after the end, else the last inside, else the
    /// reference.
    pub fn closing(&self) -> Option<&Snapshot> {
        self.closing
            .as_ref()
            .or(self.last_inside.as_ref())
            .or(self.reference())
    }
}

/// What the export says about the endpoint's scraping.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScrapeTimes {
    /// First-byte times of the first and last scrape (run-clock ns).
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub scrapes: u64,
    /// Sum of each scrape's fetch time, sent to complete (ns).
    pub fetch_ns_sum: u64,
    /// First-byte times of the scrapes that differed from the one before.
    pub updates: Vec<u64>,
}

/// Something kept per series: by family name, then label set.
type BySeries<T> = HashMap<String, HashMap<BTreeMap<String, String>, T>>;

/// Counters as Prometheus' `rate()` reads them: a value below the last one means the counter
/// started again from zero (a server restart), so its increase over that interval is the new
/// value, not a negative difference. Each counter series, and each bucket, sum and count of a
/// histogram, keeps its last raw value and the sum of the values it had before each reset;
/// scrapes are kept with that sum added, so the change between any two of them is the
/// increase, resets included.
#[derive(Debug, Default)]
struct Resets {
    /// (last raw value, added) per value of each series.
    series: BySeries<Vec<(f64, f64)>>,
    /// Families in which some series reset.
    families: BTreeSet<String>,
}

/// A series' counter values in a fixed order: a counter's value, or a histogram's buckets,
/// sum and count.
fn counter_values(v: &mut Value) -> Vec<&mut f64> {
    match v {
        Value::Scalar(x) => vec![x],
        Value::Histogram {
            buckets,
            sum,
            count,
        } => buckets
            .iter_mut()
            .map(|(_, c)| c)
            .chain([sum, count])
            .collect(),
        Value::Summary { .. } => Vec::new(),
    }
}

impl Resets {
    /// `families` with every counter made to count on across its resets; the same scrape
    /// when none of its counters has ever reset.
    fn continued(&mut self, families: &Arc<Vec<Family>>) -> Arc<Vec<Family>> {
        let mut any_added = false;
        for f in families
            .iter()
            .filter(|f| matches!(f.kind, Kind::Counter | Kind::Histogram))
        {
            let by_labels = match self.series.get_mut(&f.name) {
                Some(m) => m,
                None => self.series.entry(f.name.clone()).or_default(),
            };
            for series in &f.series {
                let mut value = series.value.clone();
                let values = counter_values(&mut value);
                let states = match by_labels.get_mut(&series.labels) {
                    Some(s) => s,
                    None => by_labels.entry(series.labels.clone()).or_default(),
                };
                if states.len() != values.len() {
                    // A new series, or buckets that changed: it starts here.
                    *states = values.iter().map(|v| (**v, 0.0)).collect();
                }
                for ((last, added), v) in states.iter_mut().zip(values) {
                    if !v.is_finite() {
                        continue;
                    }
                    if *v < *last {
                        *added += *last;
                        self.families.insert(f.name.clone());
                    }
                    *last = *v;
                    any_added |= *added != 0.0;
                }
            }
        }
        if !any_added {
            return families.clone();
        }
        let mut continued = families.as_ref().clone();
        for f in continued
            .iter_mut()
            .filter(|f| matches!(f.kind, Kind::Counter | Kind::Histogram))
        {
            let by_labels = &self.series[&f.name];
            for series in &mut f.series {
                let states = &by_labels[&series.labels];
                for ((_, added), v) in states.iter().zip(counter_values(&mut series.value)) {
                    *v += added;
                }
            }
        }
        Arc::new(continued)
    }
}

/// One endpoint's scrapes as the summaries need them.
#[derive(Debug)]
pub struct EndpointSeries {
    pub url: String,
    pub times: ScrapeTimes,
    /// First-byte time of every scrape, by ordinal.
    at_ns: Vec<u64>,
    /// Gauge (and untyped) samples.
    gauges: BySeries<SampleRuns>,
    recent: VecDeque<Snapshot>,
    windows: [Option<WindowPins>; 2],
    resets: Resets,
}

fn slot(phase: Phase) -> usize {
    match phase {
        Phase::Warmup => 0,
        Phase::Profiling => 1,
    }
}

impl EndpointSeries {
    pub fn new(url: &str) -> EndpointSeries {
        EndpointSeries {
            url: url.to_string(),
            times: ScrapeTimes::default(),
            at_ns: Vec::new(),
            gauges: HashMap::new(),
            recent: VecDeque::new(),
            windows: [None, None],
            resets: Resets::default(),
        }
    }

    /// Families with a counter that went down during the run (counted on as `rate()` does).
    pub fn reset_families(&self) -> &BTreeSet<String> {
        &self.resets.families
    }

    /// A phase started at `start_ns` (run clock).
    pub fn window_started(&mut self, phase: Phase, start_ns: u64) {
        let mut pins = WindowPins::new(start_ns);
        for s in &self.recent {
            pins.offer(s);
        }
        self.windows[slot(phase)] = Some(pins);
    }

    /// A phase ended at `end_ns` (run clock).
    pub fn window_ended(&mut self, phase: Phase, end_ns: u64) {
        if let Some(pins) = &mut self.windows[slot(phase)] {
            pins.end(end_ns, &self.recent);
        }
    }

    pub(crate) fn pins(&self, phase: Phase) -> Option<&WindowPins> {
        self.windows[slot(phase)].as_ref()
    }

    /// The last scrape, if any.
    pub(crate) fn last(&self) -> Option<&Snapshot> {
        self.recent.back()
    }

    /// The ordinals of the scrapes inside `w` (first-byte time within it, both ends
    /// included), if any.
    pub(crate) fn inside(&self, w: Window) -> Option<(u64, u64)> {
        let lo = self.at_ns.partition_point(|t| *t < w.start_ns);
        let hi = self.at_ns.partition_point(|t| *t <= w.end_ns);
        (lo < hi).then(|| (lo as u64, hi as u64 - 1))
    }

    /// The finite samples of a gauge series in the scrapes `range`.
    pub(crate) fn gauge_samples(
        &self,
        family: &str,
        labels: &BTreeMap<String, String>,
        (lo, hi): (u64, u64),
    ) -> Vec<f64> {
        self.gauges
            .get(family)
            .and_then(|f| f.get(labels))
            .map_or_else(Vec::new, |runs| runs.in_range(lo, hi))
    }
}

/// Gauges and untyped families keep every sample; counters and histograms only the pinned
/// scrapes.
fn sampled(f: &Family) -> bool {
    is_kept(f) && matches!(f.kind, Kind::Gauge | Kind::Unknown)
}

impl ScrapeSink for EndpointSeries {
    fn scraped(&mut self, s: &ScrapeEvent) {
        let ordinal = self.at_ns.len() as u64;
        self.at_ns.push(s.first_byte_ns);
        let t = &mut self.times;
        t.first_ns.get_or_insert(s.first_byte_ns);
        t.last_ns = Some(s.first_byte_ns);
        t.scrapes += 1;
        t.fetch_ns_sum += s.done_ns.saturating_sub(s.sent_ns);
        if s.changed {
            t.updates.push(s.first_byte_ns);
        }
        for family in s.families.iter().filter(|f| sampled(f)) {
            let by_labels = match self.gauges.get_mut(&family.name) {
                Some(m) => m,
                None => self.gauges.entry(family.name.clone()).or_default(),
            };
            for series in &family.series {
                let Value::Scalar(v) = series.value else {
                    continue;
                };
                if !v.is_finite() {
                    continue;
                }
                match by_labels.get_mut(&series.labels) {
                    Some(runs) => runs.push(ordinal, v),
                    None => {
                        let mut runs = SampleRuns::default();
                        runs.push(ordinal, v);
                        by_labels.insert(series.labels.clone(), runs);
                    }
                }
            }
        }
        let snapshot = Snapshot {
            at_ns: s.first_byte_ns,
            families: self.resets.continued(&s.families),
        };
        for pins in self.windows.iter_mut().flatten() {
            pins.offer(&snapshot);
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(snapshot);
    }
}

/// Replays `scrapes` (in time order) with `windows` declared as a run declares them: each
/// start after the scrapes at or before it arrived, each end likewise (tests).
#[cfg(test)]
pub(crate) fn replay(
    url: &str,
    scrapes: &[ScrapeEvent],
    windows: &[(Phase, Window)],
) -> EndpointSeries {
    let mut s = EndpointSeries::new(url);
    let mut events: Vec<(u64, bool, Phase)> = windows
        .iter()
        .flat_map(|(p, w)| [(w.start_ns, true, *p), (w.end_ns, false, *p)])
        .collect();
    events.sort_by_key(|e| (e.0, !e.1));
    let mut next = events.into_iter().peekable();
    let mut declare = |s: &mut EndpointSeries, until: Option<u64>| {
        while let Some(&(at, start, phase)) = next.peek() {
            if until.is_some_and(|t| t <= at) {
                break;
            }
            if start {
                s.window_started(phase, at);
            } else {
                s.window_ended(phase, at);
            }
            next.next();
        }
    };
    for e in scrapes {
        declare(&mut s, Some(e.first_byte_ns));
        s.scraped(e);
    }
    declare(&mut s, None);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse::parse;

    fn event(at_ns: u64, text: &str, changed: bool) -> ScrapeEvent {
        ScrapeEvent {
            sent_ns: at_ns - 1,
            first_byte_ns: at_ns,
            done_ns: at_ns + 2,
            families: Arc::new(parse(text)),
            changed,
        }
    }

    fn gauge(v: u64) -> String {
        format!("# TYPE g gauge\ng{{a=\"1\"}} {v}\n# TYPE c counter\nc_total {v}\n")
    }

    #[test]
    fn pins_are_the_scrapes_around_each_window_whenever_it_is_declared() {
        let mut s = EndpointSeries::new("http://h/metrics");
        for t in [10, 20] {
            s.scraped(&event(t, &gauge(t), true));
        }
        // Declared after the scrape at 20, which lies at its start.
        s.window_started(Phase::Profiling, 20);
        for t in [30, 40, 50] {
            s.scraped(&event(t, &gauge(t), true));
        }
        // The scrape at 50 came before the end (45) was declared.
        s.window_ended(Phase::Profiling, 45);
        s.scraped(&event(60, &gauge(60), false));
        let p = s.pins(Phase::Profiling).unwrap();
        let at = |x: Option<&Snapshot>| x.map(|s| s.at_ns);
        assert_eq!(at(p.reference()), Some(20));
        assert_eq!(at(p.first_inside.as_ref()), Some(20));
        assert_eq!(at(p.last_inside.as_ref()), Some(40));
        assert_eq!(at(p.closing()), Some(50));
        assert_eq!(s.inside(p.window), Some((1, 3)));
        let labels = BTreeMap::from([("a".to_string(), "1".to_string())]);
        assert_eq!(s.gauge_samples("g", &labels, (1, 3)), [20.0, 30.0, 40.0]);
        // Counters keep no samples; every scrape's time is kept, changed ones apart.
        assert!(!s.gauges.contains_key("c"));
        assert_eq!(s.times.scrapes, 6);
        assert_eq!(s.times.updates, [10, 20, 30, 40, 50]);
        assert_eq!(s.times.fetch_ns_sum, 6 * 3);
    }

    #[test]
    fn a_counter_that_resets_counts_on_as_rate_does() {
        let text = |c: u64, h: u64| {
            format!(
                "# TYPE c counter\nc_total {c}\n# TYPE h histogram\nh_bucket{{le=\"1\"}} {h}\n\
                 h_bucket{{le=\"+Inf\"}} {h}\nh_sum {h}\nh_count {h}\n"
            )
        };
        let mut s = EndpointSeries::new("u");
        s.window_started(Phase::Profiling, 5);
        // 10 -> 40, restart, 5 -> 25: an increase of 30 + 5 + 20.
        for (t, c) in [(10, 10), (20, 40), (30, 5), (40, 25)] {
            s.scraped(&event(t, &text(c, c / 5), true));
        }
        s.window_ended(Phase::Profiling, 40);
        let p = s.pins(Phase::Profiling).unwrap();
        let value = |snap: &Snapshot, name: &str| match &snap
            .families
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .series[0]
            .value
        {
            Value::Scalar(v) => *v,
            Value::Histogram { count, .. } => *count,
            Value::Summary { .. } => unreachable!(),
        };
        let (reference, closing) = (p.reference().unwrap(), p.closing().unwrap());
        assert_eq!(value(closing, "c") - value(reference, "c"), 55.0);
        // The histogram's count: 2 -> 8, restart, 1 -> 5.
        assert_eq!(value(closing, "h") - value(reference, "h"), 11.0);
        assert_eq!(s.reset_families().iter().collect::<Vec<_>>(), ["c", "h"]);
    }

    #[test]
    fn a_window_without_scrapes_before_it_starts_from_the_first_inside() {
        let mut s = EndpointSeries::new("u");
        s.window_started(Phase::Warmup, 5);
        s.scraped(&event(10, &gauge(1), true));
        s.scraped(&event(20, &gauge(2), true));
        s.window_ended(Phase::Warmup, 25);
        let p = s.pins(Phase::Warmup).unwrap();
        assert_eq!(p.reference().map(|x| x.at_ns), Some(10));
        // No scrape after the end: the last inside closes it.
        assert_eq!(p.closing().map(|x| x.at_ns), Some(20));
    }
}
