//! `aiperf analyze swim-lane` on a real multi-turn run against the mock (the PNG's size and
//! the HTML's session table checked against the run's records), and `analyze
//! turn-messages` on a raw-record file made here.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::{BIN, MockChild, Profile, read_jsonl, stderr_text};

fn aiperf(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// PNG width and height from its header.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The session table of the HTML page: (slot, session, requests, first start, last end, busy, idle).
fn table_rows(html: &str) -> Vec<Vec<String>> {
    let table = &html[html.find("<table id=\"sessions\">").unwrap()..];
    table
        .split("<tr><td>")
        .skip(1)
        .map(|row| {
            let row = row.split("</tr>").next().unwrap();
            row.split("</td><td>")
                .map(|c| c.trim_end_matches("</td>").to_string())
                .collect()
        })
        .collect()
}

#[test]
fn swim_lane_of_a_multi_turn_run() {
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let out = Profile::new("mock-model")
        .url(&mock.url)
        .artifact_dir(&run)
        .args(&[
            "--streaming",
            "--isl",
            "16",
            "--osl",
            "5",
            "--conversation-num",
            "6",
            "--conversation-turn-mean",
            "3",
            "--conversation-turn-delay-mean",
            "60",
            "--concurrency",
            "2",
            "--random-seed",
            "5",
        ])
        .run();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = read_jsonl(&run.join("profile_export.jsonl"));
    let mut per_session: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        let id = r["metadata"]["x_correlation_id"]
            .as_str()
            .unwrap()
            .to_string();
        *per_session.entry(id).or_default() += 1;
    }
    assert_eq!(per_session.len(), 6);

    let out = aiperf(&[
        "analyze",
        "swim-lane",
        run.to_str().unwrap(),
        "--html",
        "-c",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let png = run.join("swim_lane.png");
    let page = run.join("swim_lane.html");
    assert_eq!(
        text(&out.stdout),
        format!("saved {}\nsaved {}\n", png.display(), page.display())
    );
    let (w, h) = png_size(&png);
    assert_eq!(w, 2000);
    // Two slots of one row each: the smallest lane panel (420) and the concurrency panel.
    assert_eq!(h, 420 + 360);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg"), "the chart is inline");
    assert!(
        html.contains("6 sessions across 2 slots"),
        "the title counts them"
    );
    assert!(
        html.contains("Target concurrency (2)"),
        "the reference line's legend"
    );
    let rows = table_rows(&html);
    assert_eq!(rows.len(), 6);
    let mut seen = BTreeMap::new();
    for row in &rows {
        let slot: usize = row[0].parse().unwrap();
        assert!(slot < 2, "{row:?}");
        let requests: usize = row[3].parse().unwrap();
        seen.insert(row[1].clone(), requests);
        let (start, end, busy, idle): (f64, f64, f64, f64) = (
            row[4].parse().unwrap(),
            row[5].parse().unwrap(),
            row[6].parse().unwrap(),
            row[7].parse().unwrap(),
        );
        assert!(end > start, "{row:?}");
        // Busy and idle add up to the session's span (each printed to the ms).
        assert!((busy + idle - (end - start)).abs() < 0.003, "{row:?}");
        // Two turn gaps of ~60 ms each on average: some idle time in every 3-turn session.
        if requests == 3 {
            assert!(idle > 0.02, "{row:?}");
        }
    }
    assert_eq!(seen, per_session);
    // The first start is 0 by definition.
    assert!(rows.iter().any(|r| r[4] == "0.000"), "{rows:?}");

    // --out names the file; with two directories it is refused.
    let custom = tmp.path().join("charts/lanes.png");
    let out = aiperf(&[
        "analyze",
        "swim-lane",
        run.to_str().unwrap(),
        "-o",
        custom.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(png_size(&custom), (w, h));
    let out = aiperf(&[
        "analyze",
        "swim-lane",
        run.to_str().unwrap(),
        run.to_str().unwrap(),
        "-o",
        "x.png",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--out names one file, and 2 run directories were given"));
}

#[test]
fn swim_lane_refuses_what_it_cannot_draw() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("profile_export.jsonl"),
        "{\"metadata\": {}}\n{not json\n",
    )
    .unwrap();
    let out = aiperf(&[
        "analyze",
        "swim-lane",
        empty.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "skip {}: {}",
            empty.display(),
            empty.join("profile_export.jsonl").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("profile_export.jsonl:2: not JSON"),
        "{stderr}"
    );
    let out = aiperf(&[
        "analyze",
        "swim-lane",
        empty.to_str().unwrap(),
        "--ramp",
        "-1",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// A raw record as AIPerf's `--export-level raw` writes it (the fields read).
fn raw(conv: &str, x: &str, turn: u64, start: u64, messages: Value) -> String {
    json!({
        "metadata": {"conversation_id": conv, "x_correlation_id": x, "turn_index": turn,
                     "request_start_ns": start, "benchmark_phase": "profiling"},
        "payload": {"model": "m", "max_tokens": 32, "messages": messages},
    })
    .to_string()
}

/// The JSON the page carries.
fn page_data(html: &str) -> Value {
    let start = html.find("id=\"data\">").unwrap() + "id=\"data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn turn_messages_of_raw_records() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir_all(run.join("raw_records")).unwrap();
    let sys = json!({"role": "system", "content": "You are terse. </script><b>"});
    let u1 = json!({"role": "user", "content": "first question"});
    let a1 = json!({"role": "assistant", "content": "first answer"});
    let u2 = json!({"role": "user", "content": "second question"});
    let lines = [
        raw("conv-a", "s1", 0, 100, json!([sys, u1])),
        raw("conv-a", "s1", 1, 200, json!([sys, u1, a1, u2])),
        raw("conv-b", "s2", 0, 150, json!([u2])),
    ];
    std::fs::write(
        run.join("raw_records/shard_0.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();

    let out = aiperf(&[
        "analyze",
        "turn-messages",
        run.to_str().unwrap(),
        "--content-cap",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html_path = run.join("turn_messages.html");
    assert!(text(&out.stdout).starts_with(&format!("saved {} (", html_path.display())));
    let html = std::fs::read_to_string(&html_path).unwrap();
    // The system prompt's `</script>` cannot end the data early.
    assert_eq!(html.matches("</script>").count(), 2);
    let data = page_data(&html);
    assert_eq!(
        data["stat"],
        "2 conversations (2 shown) · 3 turns · 7 message refs (4 unique) · from 1 raw file(s)"
    );
    let msgs = data["msgs"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[0]["body"], "You are te");
    assert_eq!(msgs[0]["trunc"], 17);
    let convs = data["convs"].as_array().unwrap();
    assert_eq!(convs[0]["id"], "conv-a");
    assert_eq!(convs[0]["turns"][1]["ids"], json!([0, 1, 2, 3]));
    assert_eq!(convs[1]["id"], "conv-b");
    assert_eq!(convs[1]["turns"][0]["ids"], json!([3]));

    // One conversation shown, and a run of this build (no raw records): skipped, exit 1.
    let out = aiperf(&[
        "analyze",
        "turn-messages",
        run.to_str().unwrap(),
        "-n",
        "1",
        "--max-turns",
        "1",
        "-o",
        tmp.path().join("one.html").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let data = page_data(&std::fs::read_to_string(tmp.path().join("one.html")).unwrap());
    assert_eq!(data["convs"].as_array().unwrap().len(), 1);
    assert_eq!(data["convs"][0]["moreTurns"], 1);
    let out = aiperf(&["analyze", "turn-messages", tmp.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no raw request records under"),
        "{}",
        text(&out.stderr)
    );
}
