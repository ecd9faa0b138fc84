//! The artifact files an upload takes: Python's `Path.glob` over the artifact directory
//! (`*`, `?`, `[...]` within one path segment, `**` for any number of directories), each
//! pattern's matches sorted, then de-duplicated in pattern order, as AIPerf collects them.

use std::path::{Path, PathBuf};

/// Files under `dir` matching any of `patterns`, minus those `skip` refuses.
pub fn collect(dir: &Path, patterns: &[String], skip: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut all = Vec::new();
    walk(dir, dir, &mut all);
    let mut out: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        let segments: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
        let mut hits: Vec<&PathBuf> = all
            .iter()
            .filter(|rel| {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                path_matches(&segments, &parts)
            })
            .collect();
        hits.sort();
        for rel in hits {
            let file = dir.join(rel);
            if !out.contains(&file) && !skip(&file) {
                out.push(file);
            }
        }
    }
    out
}

/// Every regular file under `dir` (following links to files), relative to `root`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(root, &path, out);
        } else if path.is_file()
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_path_buf());
        }
    }
}

fn path_matches(pattern: &[&str], parts: &[String]) -> bool {
    match pattern.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|skip| path_matches(rest, &parts[skip..])),
        Some((seg, rest)) => match parts.split_first() {
            Some((part, more)) => {
                segment_matches(seg.as_bytes(), part.as_bytes()) && path_matches(rest, more)
            }
            None => false,
        },
    }
}

/// `fnmatch` of one segment: `*`, `?` and `[...]` (`[!...]` negated).
fn segment_matches(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| segment_matches(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && segment_matches(&p[1..], &s[1..]),
        Some(b'[') => match (p.iter().skip(2).position(|&b| b == b']'), s.first()) {
            (Some(end), Some(&c)) => {
                let class = &p[1..end + 2];
                let (negated, class) = match class.first() {
                    Some(b'!') => (true, &class[1..]),
                    _ => (false, class),
                };
                in_class(class, c) != negated && segment_matches(&p[end + 3..], &s[1..])
            }
            // No closing bracket: a literal `[`.
            (None, Some(&c)) => c == b'[' && segment_matches(&p[1..], &s[1..]),
            (_, None) => false,
        },
        Some(&c) => s.first() == Some(&c) && segment_matches(&p[1..], &s[1..]),
    }
}

fn in_class(class: &[u8], c: u8) -> bool {
    let mut i = 0;
    while i < class.len() {
        if i + 2 < class.len() && class[i + 1] == b'-' {
            if (class[i]..=class[i + 2]).contains(&c) {
                return true;
            }
            i += 3;
        } else {
            if class[i] == c {
                return true;
            }
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_pathlib_does() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "profile_export_aiperf.json",
            "profile_export_aiperf.csv",
            "a_timeslices.csv",
            "plots/ttft.png",
            "plots/deep/x.svg",
            "top.png",
            "logs/aiperf.log",
        ] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let names = |patterns: &[&str]| -> Vec<String> {
            let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
            collect(dir.path(), &patterns, |_| false)
                .iter()
                .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(names(&["*.json"]), ["profile_export_aiperf.json"]);
        assert_eq!(
            names(&["*.csv", "*_timeslices.*"]),
            ["a_timeslices.csv", "profile_export_aiperf.csv"]
        );
        assert_eq!(
            names(&["**/*.png", "**/*.svg"]),
            ["plots/ttft.png", "top.png", "plots/deep/x.svg"]
        );
        assert_eq!(names(&["logs/*.lo[g]", "*.[!j]son"]), ["logs/aiperf.log"]);
    }
}
