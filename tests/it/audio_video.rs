//! Audio and video input end to end: the real binary against the mock server. The clips
//! are read back from `inputs.json` and checked against the flags (WAV headers; ffprobe for
//! video), and the mock's audio and video tokens must show exactly in the server's prompt
//! usage.

use crate::common;
use crate::common::Profile;

use std::path::Path;
use std::process::Command;

use aiperf::api::qwen2_vl_image_tokens;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{MockChild, read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::Value;

/// (sample rate, channels, bits, seconds) from a WAV header.
fn wav_header(bytes: &[u8]) -> (u32, u16, u16, f64) {
    assert_eq!(&bytes[0..4], b"RIFF");
    assert_eq!(&bytes[8..16], b"WAVEfmt ");
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    assert_eq!(u16_at(20), 1, "PCM");
    let (channels, rate, bits) = (u16_at(22), u32_at(24), u16_at(34));
    assert_eq!(&bytes[36..40], b"data");
    let data = u32_at(40) as usize;
    assert_eq!(bytes.len(), 44 + data);
    let frames = data / (usize::from(channels) * usize::from(bits / 8));
    (rate, channels, bits, frames as f64 / f64::from(rate))
}

/// What the mock charges for one clip of `seconds`: 25 tokens a second, rounded up, + 2.
fn audio_tokens(seconds: f64) -> u64 {
    (seconds * 25.0 - 1e-9).ceil() as u64 + 2
}

/// The user message's content parts of every request in `inputs.json`, by session id.
fn sent_parts(run: &Path) -> Vec<(String, Vec<Value>)> {
    read_json(&run.join("inputs.json"))["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let parts = s["payloads"][0]["messages"][0]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            (s["session_id"].as_str().unwrap().to_string(), parts)
        })
        .collect()
}

/// The records of a run, keyed by conversation id; every one succeeded.
fn records(run: &Path) -> Vec<(String, Value)> {
    read_jsonl(&run.join("profile_export.jsonl"))
        .into_iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            let id = r["metadata"]["conversation_id"]
                .as_str()
                .unwrap()
                .to_string();
            (id, r)
        })
        .collect()
}

fn metric(r: &Value, tag: &str) -> f64 {
    r["metrics"][tag]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {tag} in {r}"))
}

/// A fast mock that adds no chat-template tokens, so prompt usage = text + media tokens.
fn mock() -> MockChild {
    MockChild::spawn(&["--fast", "--chat-template-tokens", "0"])
}

fn profile(dir: &Path, url: &str, extra: &[&str]) -> std::process::Output {
    Profile::new("Qwen/Qwen2-Audio-7B-Instruct")
        .url(url)
        .artifact_dir("run")
        .args(extra)
        .run_in(dir)
}

#[test]
fn synthetic_audio_matches_the_flags_and_the_mock_charges_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = mock();
    let out = profile(
        tmp.path(),
        &mock.url,
        &[
            "--audio-length-mean",
            "0.4",
            "--audio-length-stddev",
            "0.1",
            "--audio-sample-rates",
            "8,22.05",
            "--audio-depths",
            "8,24",
            "--audio-num-channels",
            "2",
            "--audio-batch-size",
            "2",
            "--isl",
            "40",
            "--osl",
            "4",
            "--request-count",
            "8",
            "--concurrency",
            "2",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let sent = sent_parts(&run);
    let records = records(&run);
    assert_eq!(records.len(), 8);
    let (mut rates, mut depths, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
    for (id, r) in &records {
        let parts = &sent.iter().find(|(s, _)| s == id).unwrap().1;
        // Texts first, then the two clips.
        assert_eq!(parts[0]["type"], "text");
        let clips: Vec<&Value> = parts
            .iter()
            .filter(|p| p["type"] == "input_audio")
            .collect();
        assert_eq!(clips.len(), 2, "{parts:?}");
        assert_eq!(parts.len(), 3);
        let mut expected_audio_tokens = 0;
        let mut first_seconds = None;
        for clip in clips {
            assert_eq!(clip["input_audio"]["format"], "wav");
            let wav = STANDARD
                .decode(clip["input_audio"]["data"].as_str().unwrap())
                .unwrap();
            let (rate, channels, bits, seconds) = wav_header(&wav);
            assert_eq!(channels, 2);
            assert!(rate == 8000 || rate == 22050, "{rate}");
            assert!(bits == 8 || bits == 24, "{bits}");
            assert!((0.01..1.0).contains(&seconds), "{seconds}");
            rates.push(rate);
            depths.push(bits);
            lengths.push(seconds);
            expected_audio_tokens += audio_tokens(seconds);
            first_seconds.get_or_insert(seconds);
        }
        // The server's prompt = the client's text tokens + the clips' audio tokens.
        let isl = metric(r, "input_sequence_length") as u64;
        assert_eq!(isl, 40);
        assert_eq!(
            metric(r, "usage_prompt_tokens") as u64,
            isl + expected_audio_tokens
        );
        // audio_duration is the first clip's; RTFx is it over the latency in seconds.
        let seconds = first_seconds.unwrap();
        assert!((metric(r, "audio_duration") - seconds).abs() < 1e-9);
        let latency_s = metric(r, "request_latency") / 1e3;
        let rtfx = metric(r, "rtfx");
        assert!((rtfx - seconds / latency_s).abs() <= 1e-6 * rtfx, "{rtfx}");
    }
    // Both rates and both depths are drawn; lengths vary around the mean.
    for rate in [8000, 22050] {
        assert!(rates.contains(&rate), "{rates:?}");
    }
    for bits in [8, 24] {
        assert!(depths.contains(&bits), "{depths:?}");
    }
    let mean = lengths.iter().sum::<f64>() / lengths.len() as f64;
    assert!((mean - 0.4).abs() < 0.08, "{mean}");
    assert!(lengths.iter().any(|&l| (l - lengths[0]).abs() > 1e-3));
    // The summary has RTFx and the audio duration.
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert!(summary["rtfx"]["avg"].as_f64().unwrap() > 0.0, "{summary}");
    assert!(summary["audio_duration"]["avg"].as_f64().unwrap() > 0.0);
}

/// ffmpeg (and ffprobe) on the PATH; when missing, the video tests are skipped unless
/// AIPERF_REQUIRE_FFMPEG is set (CI sets it).
fn have_ffmpeg() -> bool {
    let ok = ["ffmpeg", "ffprobe"].iter().all(|p| {
        Command::new(p)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !ok {
        assert!(
            std::env::var_os("AIPERF_REQUIRE_FFMPEG").is_none(),
            "AIPERF_REQUIRE_FFMPEG is set but ffmpeg/ffprobe are not on the PATH"
        );
        eprintln!("skipped: ffmpeg/ffprobe not found (install ffmpeg to run the video tests)");
    }
    ok
}

/// ffprobe's view of a clip: (codec, width, height, frame rate, frames) of the video
/// stream, and the codec of an audio stream if any.
fn probe(file: &Path) -> (String, u64, u64, String, u64, Option<String>) {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-show_streams",
            "-of",
            "json",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let streams = v["streams"].as_array().unwrap();
    let video = streams.iter().find(|s| s["codec_type"] == "video").unwrap();
    let audio = streams.iter().find(|s| s["codec_type"] == "audio");
    (
        video["codec_name"].as_str().unwrap().to_string(),
        video["width"].as_u64().unwrap(),
        video["height"].as_u64().unwrap(),
        video["r_frame_rate"].as_str().unwrap().to_string(),
        video["nb_read_frames"].as_str().unwrap().parse().unwrap(),
        audio.map(|a| a["codec_name"].as_str().unwrap().to_string()),
    )
}

/// Writes each request's video clips to files: (session id, files).
fn sent_videos(run: &Path, dir: &Path) -> Vec<(String, Vec<std::path::PathBuf>)> {
    sent_parts(run)
        .into_iter()
        .enumerate()
        .map(|(i, (id, parts))| {
            let files = parts
                .iter()
                .filter(|p| p["type"] == "video_url")
                .enumerate()
                .map(|(j, p)| {
                    let url = p["video_url"]["url"].as_str().unwrap();
                    let (meta, b64) = url.split_once(',').unwrap();
                    let ext = meta
                        .strip_prefix("data:video/")
                        .and_then(|m| m.strip_suffix(";base64"))
                        .unwrap();
                    let path = dir.join(format!("clip-{i}-{j}.{ext}"));
                    std::fs::write(&path, STANDARD.decode(b64).unwrap()).unwrap();
                    path
                })
                .collect();
            (id, files)
        })
        .collect()
}

/// What the mock charges for a clip: pairs of frames at the image cost of the frame size.
fn video_tokens(width: u32, height: u32, frames: u64) -> u64 {
    frames.div_ceil(2) * (qwen2_vl_image_tokens(width, height) - 2) + 2
}

#[test]
fn synthetic_webm_video_decodes_to_the_asked_shape() {
    if !have_ffmpeg() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mock = mock();
    let out = profile(
        tmp.path(),
        &mock.url,
        &[
            "--video-width",
            "96",
            "--video-height",
            "64",
            "--video-duration",
            "1.5",
            "--video-fps",
            "6",
            "--video-batch-size",
            "2",
            "--isl",
            "30",
            "--osl",
            "3",
            "--request-count",
            "3",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let videos = sent_videos(&run, tmp.path());
    for (id, r) in records(&run) {
        let files = &videos.iter().find(|(s, _)| *s == id).unwrap().1;
        assert_eq!(files.len(), 2);
        for f in files {
            let (codec, w, h, rate, frames, audio) = probe(f);
            assert_eq!(
                (codec.as_str(), w, h, rate.as_str(), frames, audio),
                ("vp9", 96, 64, "6/1", 9, None)
            );
        }
        assert_eq!(
            metric(&r, "usage_prompt_tokens") as u64,
            30 + 2 * video_tokens(96, 64, 9)
        );
    }
    let log = std::fs::read_to_string(run.join("logs/aiperf.log")).unwrap();
    assert!(log.contains("Built 6 media clips"), "{log}");
}

#[test]
fn mp4_video_with_an_audio_track() {
    if !have_ffmpeg() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mock = mock();
    let out = profile(
        tmp.path(),
        &mock.url,
        &[
            "--video-width",
            "64",
            "--video-height",
            "64",
            "--video-duration",
            "1",
            "--video-fps",
            "5",
            "--video-synth-type",
            "grid-clock",
            "--video-format",
            "mp4",
            "--video-codec",
            "libx264",
            "--video-audio-num-channels",
            "1",
            "--video-audio-sample-rate",
            "16",
            "--isl",
            "20",
            "--osl",
            "2",
            "--request-count",
            "2",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let videos = sent_videos(&run, tmp.path());
    for (id, r) in records(&run) {
        let files = &videos.iter().find(|(s, _)| *s == id).unwrap().1;
        let (codec, w, h, rate, frames, audio) = probe(&files[0]);
        assert_eq!(
            (codec.as_str(), w, h, rate.as_str(), frames),
            ("h264", 64, 64, "5/1", 5)
        );
        assert_eq!(audio.as_deref(), Some("opus"));
        assert_eq!(
            metric(&r, "usage_prompt_tokens") as u64,
            20 + video_tokens(64, 64, 5)
        );
    }
}

/// A WAV of `frames` 16-bit mono samples at `rate`.
fn wav_file(frames: u32, rate: u32) -> Vec<u8> {
    let data = frames * 2;
    let mut v = b"RIFF".to_vec();
    v.extend_from_slice(&(36 + data).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    for x in [
        16u32.to_le_bytes().to_vec(),
        1u16.to_le_bytes().to_vec(),
        1u16.to_le_bytes().to_vec(),
    ] {
        v.extend_from_slice(&x);
    }
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&(rate * 2).to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&16u16.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&data.to_le_bytes());
    v.extend((0..data).map(|i| (i * 7) as u8));
    v
}

#[test]
fn audio_and_video_from_an_input_file() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("one.wav"), wav_file(16_000, 16_000)).unwrap();
    let inline = STANDARD.encode(wav_file(4_000, 8_000));
    let video = have_ffmpeg().then(|| {
        let status = Command::new("ffmpeg")
            .args([
                "-v",
                "error",
                "-f",
                "lavfi",
                "-i",
                "testsrc=size=64x32:rate=2:duration=2",
            ])
            .args(["-c:v", "libvpx-vp9", "-deadline", "realtime"])
            .arg(tmp.path().join("clip.webm"))
            .status()
            .unwrap();
        assert!(status.success());
        "clip.webm"
    });
    let mut lines = vec![
        serde_json::json!({"text": "Transcribe this.", "audio": "one.wav"}).to_string(),
        serde_json::json!({"texts": ["Two clips."], "audios": [format!("data:audio/wav;base64,{inline}"), format!("wav,{inline}")]}).to_string(),
    ];
    if let Some(v) = video {
        lines.push(serde_json::json!({"text": "What moves?", "video": v}).to_string());
    }
    std::fs::write(tmp.path().join("in.jsonl"), lines.join("\n")).unwrap();
    let mock = mock();
    let n = lines.len().to_string();
    let out = profile(
        tmp.path(),
        &mock.url,
        &[
            "--input-file",
            "in.jsonl",
            "--custom-dataset-type",
            "single_turn",
            "--request-count",
            &n,
            "--osl",
            "2",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let mut records: Vec<Value> = records(&run).into_iter().map(|(_, r)| r).collect();
    records.sort_by_key(|r| r["metadata"]["session_num"].as_u64());
    let tokens = |r: &Value| {
        metric(r, "usage_prompt_tokens") as u64 - metric(r, "input_sequence_length") as u64
    };
    // 1 s of audio; then two clips of 0.5 s (the first gives audio_duration).
    assert_eq!(tokens(&records[0]), audio_tokens(1.0));
    assert_eq!(metric(&records[0], "audio_duration"), 1.0);
    assert_eq!(tokens(&records[1]), 2 * audio_tokens(0.5));
    assert_eq!(metric(&records[1], "audio_duration"), 0.5);
    if video.is_some() {
        // testsrc at 2 fps for 2 s: 4 frames of 64x32.
        assert_eq!(tokens(&records[2]), video_tokens(64, 32, 4));
        assert!(records[2]["metrics"]["audio_duration"].is_null());
    }
}

#[test]
fn audio_transcription_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&[
        "--fast",
        "--chat-template-tokens",
        "0",
        "--record-requests",
        log.to_str().unwrap(),
    ]);
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "openai/whisper-large-v3",
            "--tokenizer",
            "builtin",
            "--url",
            &mock.url,
            "--endpoint-type",
            "audio_transcription",
            "--audio-length-mean",
            "2",
            "--audio-sample-rates",
            "16",
            "--extra-inputs",
            "language:en",
            "--request-count",
            "3",
            "--wait-for-model-timeout",
            "10",
            "--artifact-dir",
            "run",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    // AIPerf's title for this endpoint type.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NVIDIA AIPerf | Audio Transcription Metrics"),
        "{stdout}"
    );
    let run = tmp.path().join("run");
    let records = records(&run);
    assert_eq!(records.len(), 3);
    for (_, r) in &records {
        // 2 s of audio: 52 prompt tokens.
        assert_eq!(metric(r, "usage_prompt_tokens"), 52.0);
        // As AIPerf: the endpoint neither tokenizes its input nor produces tokens, so the
        // lengths are absent rather than zero.
        for absent in [
            "input_sequence_length",
            "output_sequence_length",
            "output_token_count",
        ] {
            assert!(r["metrics"].get(absent).is_none(), "{absent} in {r}");
        }
        assert_eq!(metric(r, "audio_duration"), 2.0);
        let rtfx = metric(r, "rtfx");
        assert!((rtfx - 2.0 / (metric(r, "request_latency") / 1e3)).abs() <= 1e-6 * rtfx);
    }
    // inputs.json lists each form as JSON: the WAV that was sent, the model, the extras.
    let inputs = read_json(&run.join("inputs.json"));
    for s in inputs["data"].as_array().unwrap() {
        let form = &s["payloads"][0];
        assert_eq!(form["model"], "openai/whisper-large-v3");
        assert_eq!(form["language"], "en");
        assert_eq!(form["file"]["filename"], "audio.wav");
        let wav = STANDARD
            .decode(form["file"]["base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(wav_header(&wav), (16_000, 1, 16, 2.0));
    }
    // The mock records transcriptions like chat requests.
    // (Besides the readiness probe that --wait-for-model-timeout sends first.)
    let served: Vec<Value> = common::read_served(&log)
        .into_iter()
        .filter(|s| s["x_request_id"] != "aiperf-readiness-probe")
        .collect();
    assert_eq!(served.len(), 3);
    for s in &served {
        assert_eq!(s["endpoint"], "audio_transcription", "{s}");
        assert_eq!(
            (s["prompt_tokens"].as_u64(), s["output_tokens"].as_u64()),
            (Some(52), Some(5)),
            "{s}"
        );
    }
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    for absent in [
        "input_sequence_length",
        "output_sequence_length",
        "output_token_throughput",
        "input_token_throughput",
        "total_token_throughput",
        "total_isl",
        "total_osl",
    ] {
        assert!(summary.get(absent).is_none(), "{absent}: {summary}");
    }
    assert_eq!(summary["request_count"]["avg"], 3.0, "{summary}");
    assert!(!stdout.contains("Input Sequence Length"), "{stdout}");
    assert!(!stdout.contains("Output Token Throughput"), "{stdout}");
    assert_eq!(
        summary["input_config"]["endpoint"]["type"], "audio_transcription",
        "{}",
        summary["input_config"]
    );
}

#[test]
fn bad_media_flags_exit_2_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--audio-length-mean", "1", "--audio-format", "mp3"],
            "--audio-format mp3",
        ),
        (
            &["--audio-length-mean", "0.005"],
            "--audio-length-mean 0.005",
        ),
        (
            &["--audio-length-mean", "1", "--audio-depths", "12"],
            "--audio-depths 12",
        ),
        (
            &["--audio-length-mean", "1", "--audio-num-channels", "3"],
            "--audio-num-channels 3",
        ),
        (&["--audio-depths", "24"], "--audio-depths: audio is off"),
        (&["--video-width", "64"], "--video-width/--video-height"),
        (
            &["--video-width", "63", "--video-height", "64"],
            "--video-width 63",
        ),
        (&["--video-fps", "8"], "--video-fps: video is off"),
        (&["--endpoint-type", "audio_transcription"], "needs audio"),
        (
            &[
                "--endpoint-type",
                "audio_transcription",
                "--audio-length-mean",
                "1",
                "--osl",
                "9",
            ],
            "--output-tokens-mean",
        ),
        (
            &["--endpoint-type", "completions", "--audio-length-mean", "1"],
            "audio needs --endpoint-type chat",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec![
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--url",
            "127.0.0.1:9",
        ];
        all.extend_from_slice(args);
        let out = run_aiperf_in(tmp.path(), &all);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn missing_ffmpeg_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(common::BIN)
        .args([
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--url",
            "127.0.0.1:9",
        ])
        .args([
            "--video-width",
            "64",
            "--video-height",
            "64",
            "--request-count",
            "1",
        ])
        .current_dir(tmp.path())
        .env("PATH", tmp.path())
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--video-width/--video-height"), "{err}");
    assert!(err.contains("apt-get install ffmpeg"), "{err}");
}
