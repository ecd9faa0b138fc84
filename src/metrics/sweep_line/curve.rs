//! A curve: the step function one sweep of the events makes, kept to be read again for
//! each figure and window. A small curve is held in memory; a large one is written to a
//! spill as it is swept and read back from there, so no run holds a whole curve.

use super::SpanSource;
use super::events::{Events, List};
use super::weighted::Limits;
use crate::metrics::column;
use crate::spill::{Log, Reader, Spill};

/// A right-continuous step function summed from event lists: the level after the last
/// event at each time, 0 before the first. Only the value after the last event at a time
/// is kept, since the ones before it are held for no time. Levels below a billionth of
/// the largest one are rounding residue (large +/- pairs do not cancel exactly) and read 0.
pub(super) struct Curve {
    /// Levels of a smaller magnitude read 0.
    floor: f64,
    store: Store,
}

enum Store {
    Held(Vec<(f64, f64)>),
    /// Each point as its time's bits, then its value as `column::encode` writes it (a
    /// varint for a whole number, else a marker and its bits): decoded with a branch or
    /// two, where a varint time took a loop. And each chunk's first time, where reading a
    /// window can start.
    Spilled(Log, Vec<f64>),
}

impl Curve {
    /// Sweeps the events of `lists` over `spans` once, holding the points while they are
    /// few and writing them to a spill of the curve's own from then on (removed with it).
    pub(super) fn build(spans: &dyn SpanSource, lists: &[List], limits: Limits) -> Curve {
        let mut level = 0.0;
        let mut peak = 0.0f64;
        let mut store = Building {
            held: Vec::new(),
            log: None,
            firsts: Vec::new(),
            limits,
        };
        let mut pending: Option<(f64, f64)> = None;
        for (t, delta) in Events::new(spans, lists) {
            level += delta;
            peak = peak.max(level.abs());
            match &mut pending {
                Some(p) if p.0 == t => p.1 = level,
                _ => {
                    if let Some(point) = pending.replace((t, level)) {
                        store.push(point);
                    }
                }
            }
        }
        if let Some(point) = pending {
            store.push(point);
        }
        let floor = 1e-9 * peak;
        let store = match store.log {
            Some(mut log) => {
                log.close();
                Store::Spilled(log, store.firsts)
            }
            None => {
                let mut held = store.held;
                for p in &mut held {
                    if p.1.abs() < floor {
                        p.1 = 0.0;
                    }
                }
                held.shrink_to_fit();
                Store::Held(held)
            }
        };
        Curve { floor, store }
    }

    /// A curve of `points` (times distinct, in order), held or spilled as a swept one.
    #[cfg(test)]
    pub(super) fn of_points(points: impl Iterator<Item = (f64, f64)>, limits: Limits) -> Curve {
        let mut store = Building {
            held: Vec::new(),
            log: None,
            firsts: Vec::new(),
            limits,
        };
        for point in points {
            store.push(point);
        }
        let store = match store.log {
            Some(mut log) => {
                log.close();
                Store::Spilled(log, store.firsts)
            }
            None => {
                store.held.shrink_to_fit();
                Store::Held(store.held)
            }
        };
        // No level is residue: the points are read as they are.
        Curve { floor: 0.0, store }
    }

    /// Whether the curve has no point (a spilled one always has some).
    pub(super) fn is_empty(&self) -> bool {
        matches!(&self.store, Store::Held(points) if points.is_empty())
    }

    /// `(time, value)` points in time order (times distinct).
    #[cfg(test)]
    pub(super) fn points(&self) -> Points<'_> {
        self.points_from(f64::NEG_INFINITY)
    }

    /// The points from the last one at or before `t` (from the first when none is), then
    /// every later one: all that a figure over a window starting at `t` reads, as the
    /// earlier points only give way to it.
    pub(super) fn points_from(&self, t: f64) -> Points<'_> {
        match &self.store {
            Store::Held(points) => {
                let at = points.partition_point(|p| p.0 <= t).saturating_sub(1);
                Points::Held(points[at..].iter())
            }
            Store::Spilled(log, firsts) => Points::Spilled {
                reader: log.reader_from(firsts.partition_point(|&f| f <= t).saturating_sub(1)),
                floor: self.floor,
            },
        }
    }

    /// Whether the curve went to a spill.
    #[cfg(test)]
    pub(super) fn is_spilled(&self) -> bool {
        matches!(self.store, Store::Spilled(..))
    }
}

/// A curve's points as the sweep makes them: held until there are more than `limit`, then
/// all written to a log.
struct Building {
    held: Vec<(f64, f64)>,
    log: Option<Log>,
    /// The first time of each chunk written.
    firsts: Vec<f64>,
    limits: Limits,
}

impl Building {
    fn push(&mut self, point: (f64, f64)) {
        match &mut self.log {
            Some(log) => write_point(log, &mut self.firsts, point),
            None => {
                self.held.push(point);
                if self.held.len() > self.limits.hold_points {
                    let mut log = Log::with_chunk(&Spill::new(), self.limits.curve_chunk);
                    for p in std::mem::take(&mut self.held) {
                        write_point(&mut log, &mut self.firsts, p);
                    }
                    self.log = Some(log);
                }
            }
        }
    }
}

fn write_point(log: &mut Log, firsts: &mut Vec<f64>, (t, v): (f64, f64)) {
    if log.at_chunk_start() {
        firsts.push(t);
    }
    let out = log.tail();
    out.extend_from_slice(&t.to_bits().to_le_bytes());
    column::encode(out, v);
    log.end_item();
}

/// A curve's points, from memory or read back from its spill.
pub(super) enum Points<'a> {
    Held(std::slice::Iter<'a, (f64, f64)>),
    Spilled { reader: Reader<'a>, floor: f64 },
}

impl Iterator for Points<'_> {
    type Item = (f64, f64);

    fn next(&mut self) -> Option<(f64, f64)> {
        match self {
            Points::Held(points) => points.next().copied(),
            Points::Spilled { reader, floor } => {
                let bytes = reader.rest()?;
                let t = f64::from_bits(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")));
                let (v, len) = column::decode_one(&bytes[8..]);
                reader.advance(8 + len);
                Some((t, if v.abs() < *floor { 0.0 } else { v }))
            }
        }
    }
}
