//! The console report as the run printed it (`profile_export_console.txt`, the sweep table),
//! split back into tables and text, so the HTML report shows the same numbers as the console.
//! The tables are drawn with box characters (see `export::table`): a title line, `┏` top,
//! `┃` header lines, `┡` rule, `│` body lines, `└` bottom; a cell too wide for its column
//! continues on the next line.

/// One piece of the console report.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Table(Table),
    /// Lines outside any table (the command line, fidelity lines, warnings).
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    /// Per column: the console right-justifies it.
    pub right: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

pub fn parse(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let mut table: Option<Table> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(t) = table.as_mut() {
            if trimmed.starts_with('┃') {
                let cells = cells(trimmed, '┃');
                if t.header.is_empty() {
                    t.right = cells.iter().map(|c| is_right(c)).collect();
                    t.header = cells.iter().map(|c| c.trim().to_string()).collect();
                } else {
                    join_into(&mut t.header, &cells);
                }
                continue;
            }
            if trimmed.starts_with('┡') {
                continue;
            }
            if trimmed.starts_with('│') {
                let cells: Vec<String> = cells(trimmed, '│')
                    .iter()
                    .map(|c| c.trim().to_string())
                    .collect();
                // A wrapped cell's next line leaves most of the row's cells empty (a new
                // row may leave one empty, e.g. the sweep table's Pareto mark).
                let filled = cells.iter().filter(|c| !c.is_empty()).count();
                let continues = filled * 2 <= cells.len();
                match t.rows.last_mut() {
                    Some(last) if continues && last.len() == cells.len() => join_into(last, &cells),
                    _ => t.rows.push(cells),
                }
                continue;
            }
            if trimmed.starts_with('└') {
                blocks.push(Block::Table(table.take().expect("in a table")));
                continue;
            }
            // Anything else ends a table that was not closed.
            blocks.push(Block::Table(table.take().expect("in a table")));
        }
        if trimmed.starts_with('┏') {
            // The title is the line just above the top border.
            let title = match lines.last() {
                Some(l) if !l.trim().is_empty() => lines.pop().unwrap_or_default().trim(),
                _ => "",
            };
            flush_text(&mut blocks, &mut lines);
            table = Some(Table {
                title: title.to_string(),
                ..Table::default()
            });
            continue;
        }
        lines.push(line);
    }
    if let Some(t) = table {
        blocks.push(Block::Table(t));
    }
    flush_text(&mut blocks, &mut lines);
    blocks
}

/// The cells between the border characters (the outer borders dropped).
fn cells(line: &str, border: char) -> Vec<&str> {
    let inner = line.trim_end();
    let inner = inner.strip_prefix(border).unwrap_or(inner);
    let inner = inner.strip_suffix(border).unwrap_or(inner);
    inner.split(border).collect()
}

/// A cell padded more on the left than on the right was right-justified.
fn is_right(cell: &str) -> bool {
    let lead = cell.len() - cell.trim_start().len();
    let trail = cell.len() - cell.trim_end().len();
    lead > trail
}

/// Appends a continuation line's cells to the row they belong to.
fn join_into<S: AsRef<str>>(row: &mut [String], more: &[S]) {
    for (cell, extra) in row.iter_mut().zip(more) {
        let extra = extra.as_ref().trim();
        if extra.is_empty() {
            continue;
        }
        if !cell.is_empty() {
            cell.push(' ');
        }
        cell.push_str(extra);
    }
}

fn flush_text(blocks: &mut Vec<Block>, lines: &mut Vec<&str>) {
    let text = lines.join("\n");
    lines.clear();
    let text = text.trim_matches('\n').trim_end();
    if !text.trim().is_empty() {
        blocks.push(Block::Text(text.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::table::{Justify, Table as ConsoleTable};

    #[test]
    fn tables_rendered_for_the_console_parse_back_with_wrapped_cells_joined() {
        let mut t = ConsoleTable::new("NVIDIA AIPerf | LLM Metrics")
            .column("Metric", Justify::Right)
            .column("avg", Justify::Right)
            .column("p50", Justify::Right);
        t.row(vec![
            "Time to First Token (ms)".into(),
            "20.99".into(),
            "20.81".into(),
        ]);
        t.row(vec![
            "Output Token Throughput Per User (tokens/sec/user)".into(),
            "1,199.37".into(),
            "N/A".into(),
        ]);
        // One empty cell: still a row of its own.
        t.row(vec!["Request Count".into(), "20.00".into(), String::new()]);
        let text = format!(
            "CLI Command: aiperf profile\n\n{}\nBenchmark Duration: 0.59 sec\n",
            t.render(40)
        );
        assert!(
            text.lines().count() > 8,
            "the narrow width wraps the long name: {text}"
        );
        let blocks = parse(&text);
        assert_eq!(blocks.len(), 3, "{blocks:?}");
        assert_eq!(blocks[0], Block::Text("CLI Command: aiperf profile".into()));
        let Block::Table(table) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(table.title, "NVIDIA AIPerf | LLM Metrics");
        assert_eq!(table.header, ["Metric", "avg", "p50"]);
        assert_eq!(table.right, [true, true, true]);
        assert_eq!(
            table.rows,
            [
                vec!["Time to First Token (ms)", "20.99", "20.81"],
                vec![
                    "Output Token Throughput Per User (tokens/sec/user)",
                    "1,199.37",
                    "N/A"
                ],
                vec!["Request Count", "20.00", ""],
            ]
        );
        assert_eq!(
            blocks[2],
            Block::Text("Benchmark Duration: 0.59 sec".into())
        );
    }

    #[test]
    fn left_justified_columns_and_text_without_tables() {
        let mut t = ConsoleTable::new("Server Metrics")
            .column("Metric", Justify::Left)
            .column("avg", Justify::Right);
        t.row(vec!["Requests running".into(), "4.00".into()]);
        let blocks = parse(&t.render(100));
        let Block::Table(table) = &blocks[0] else {
            panic!("{blocks:?}")
        };
        assert_eq!(table.right, [false, true]);
        assert_eq!(
            parse("just a line\nand another"),
            [Block::Text("just a line\nand another".into())]
        );
        assert!(parse("").is_empty());
    }
}
