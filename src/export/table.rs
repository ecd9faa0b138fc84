//! Plain-text tables drawn like the Python `rich` library draws AIPerf's console report:
//! heavy box characters around the header, a centred title, cells padded by one space,
//! and the widest columns wrapped at word boundaries when the table would be too wide.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Justify {
    Left,
    Right,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    headers: Vec<(String, Justify)>,
    rows: Vec<Vec<String>>,
}

/// One space on each side of every cell.
const PADDING: usize = 2;

fn text_width(s: &str) -> usize {
    s.chars().count()
}

impl Table {
    pub fn new(title: &str) -> Table {
        Table {
            title: title.to_string(),
            headers: Vec::new(),
            rows: Vec::new(),
        }
    }

    pub fn column(mut self, header: &str, justify: Justify) -> Table {
        self.headers.push((header.to_string(), justify));
        self
    }

    /// Adds a row; a cell may hold several lines separated by `\n`.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Column widths including padding, shrunk to fit `max_width` as rich does.
    fn column_widths(&self, max_width: usize) -> Vec<usize> {
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .enumerate()
            .map(|(i, (header, _))| {
                std::iter::once(header.as_str())
                    .chain(self.rows.iter().map(|r| r[i].as_str()))
                    .flat_map(|cell| cell.split('\n'))
                    .map(text_width)
                    .max()
                    .unwrap_or(0)
                    + PADDING
            })
            .collect();
        let borders = self.headers.len() + 1;
        let available = max_width.saturating_sub(borders);
        if widths.iter().sum::<usize>() > available {
            widths = collapse_widest(widths, available);
            let total: usize = widths.iter().sum();
            if total > available {
                // Last resort: take the excess from all columns alike.
                let n = widths.len();
                widths = ratio_reduce(total - available, &vec![1; n], &widths.clone(), &widths);
            }
        }
        widths
    }

    /// Renders title and table; lines end with `\n`, without trailing spaces.
    pub fn render(&self, max_width: usize) -> String {
        let widths = self.column_widths(max_width);
        let table_width: usize = widths.iter().sum::<usize>() + widths.len() + 1;
        let mut out = String::new();

        let title_width = text_width(&self.title);
        let left = table_width.saturating_sub(title_width) / 2;
        out.push_str(&" ".repeat(left));
        out.push_str(&self.title);
        out.push('\n');

        let rule = |l: &str, fill: &str, mid: &str, r: &str| {
            let parts: Vec<String> = widths.iter().map(|w| fill.repeat(*w)).collect();
            format!("{l}{}{r}\n", parts.join(mid))
        };
        out.push_str(&rule("┏", "━", "┳", "┓"));
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        self.render_row(&mut out, &headers, &widths, "┃");
        out.push_str(&rule("┡", "━", "╇", "┩"));
        for row in &self.rows {
            self.render_row(&mut out, row, &widths, "│");
        }
        out.push_str(&rule("└", "─", "┴", "┘"));
        out
    }

    fn render_row(&self, out: &mut String, cells: &[String], widths: &[usize], bar: &str) {
        let wrapped: Vec<Vec<String>> = cells
            .iter()
            .zip(widths)
            .map(|(cell, w)| wrap(cell, w.saturating_sub(PADDING)))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..height {
            out.push_str(bar);
            for (col, lines) in wrapped.iter().enumerate() {
                let content = widths[col].saturating_sub(PADDING);
                let text = lines.get(line).map_or("", String::as_str);
                let gap = " ".repeat(content.saturating_sub(text_width(text)));
                out.push(' ');
                match self.headers[col].1 {
                    Justify::Right => {
                        out.push_str(&gap);
                        out.push_str(text);
                    }
                    Justify::Left => {
                        out.push_str(text);
                        out.push_str(&gap);
                    }
                }
                out.push(' ');
                out.push_str(bar);
            }
            out.push('\n');
        }
    }
}

/// Greedy word wrap to `width` columns; words longer than a line are cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        let mut line_width = 0;
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            let mut word: Vec<char> = word.chars().collect();
            if line_width > 0 && line_width + 1 + word.len() <= width {
                line.push(' ');
                line_width += 1;
            } else if line_width > 0 {
                lines.push(std::mem::take(&mut line));
                line_width = 0;
            }
            while word.len() > width - line_width {
                let rest = word.split_off(width - line_width);
                line.extend(word);
                lines.push(std::mem::take(&mut line));
                line_width = 0;
                word = rest;
            }
            line_width += word.len();
            line.extend(word);
        }
        lines.push(line);
    }
    lines
}

/// Narrows the widest columns step by step (to the next widest) until the total fits,
/// the way rich collapses wrappable columns.
fn collapse_widest(mut widths: Vec<usize>, available: usize) -> Vec<usize> {
    loop {
        let total: usize = widths.iter().sum();
        if total <= available {
            return widths;
        }
        let excess = total - available;
        let widest = *widths.iter().max().unwrap_or(&0);
        let next = widths
            .iter()
            .copied()
            .filter(|&w| w != widest)
            .max()
            .unwrap_or(0);
        if widest == next || widest == 0 {
            return widths;
        }
        let ratios: Vec<usize> = widths.iter().map(|&w| usize::from(w == widest)).collect();
        let limit = vec![excess.min(widest - next); widths.len()];
        widths = ratio_reduce(excess, &ratios, &limit, &widths);
    }
}

/// Takes `total` away from `values` in proportion to `ratios`, at most `maximums[i]` from
/// each, rounding half to even as Python's `round` does.
fn ratio_reduce(
    total: usize,
    ratios: &[usize],
    maximums: &[usize],
    values: &[usize],
) -> Vec<usize> {
    let ratios: Vec<usize> = ratios
        .iter()
        .zip(maximums)
        .map(|(&r, &m)| if m > 0 { r } else { 0 })
        .collect();
    let mut total_ratio: usize = ratios.iter().sum();
    let mut remaining = total as f64;
    let mut result = Vec::with_capacity(values.len());
    for ((&ratio, &maximum), &value) in ratios.iter().zip(maximums).zip(values) {
        if ratio > 0 && total_ratio > 0 {
            let share = (ratio as f64 * remaining / total_ratio as f64).round_ties_even();
            let taken = (maximum as f64).min(share).min(value as f64);
            result.push(value - taken as usize);
            remaining -= taken;
            total_ratio -= ratio;
        } else {
            result.push(value);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_words_and_cuts_long_words() {
        assert_eq!(
            wrap("Time to First Token (ms)", 20),
            ["Time to First Token", "(ms)"]
        );
        assert_eq!(wrap("Request Latency (ms)", 20), ["Request Latency (ms)"]);
        assert_eq!(wrap("a\nb c", 10), ["a", "b c"]);
        assert_eq!(wrap("abcdefgh xy", 3), ["abc", "def", "gh", "xy"]);
        assert_eq!(wrap("", 5), [""]);
    }

    #[test]
    fn widest_column_shrinks_to_fit() {
        // 35 + 7 * 10 = 105 > 101 - 9 borders = 92.
        let widths = collapse_widest(vec![35, 10, 10, 10, 10, 10, 10, 10], 92);
        assert_eq!(widths, vec![22, 10, 10, 10, 10, 10, 10, 10]);
        // Two equally wide columns share the cut.
        assert_eq!(collapse_widest(vec![20, 20, 5], 35), vec![15, 15, 5]);
    }

    #[test]
    fn small_table_renders_with_heavy_header() {
        let mut t = Table::new("T")
            .column("k", Justify::Right)
            .column("value", Justify::Left);
        t.row(vec!["a".into(), "x".into()]);
        t.row(vec!["bb".into(), "y\nz".into()]);
        let expected = "      T
┏━━━━┳━━━━━━━┓
┃  k ┃ value ┃
┡━━━━╇━━━━━━━┩
│  a │ x     │
│ bb │ y     │
│    │ z     │
└────┴───────┘
";
        assert_eq!(t.render(80), expected);
    }
}
