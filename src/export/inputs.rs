//! `inputs.json`: what was sent, by session, as AIPerf lists it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::INPUTS_FILE;
use crate::endpoint::audio_transcription;
use crate::load::SendPlan;

/// `inputs.json` of a run's plan.
pub struct InputsJson<'a>(pub &'a SendPlan);

impl super::Exporter for InputsJson<'_> {
    fn what(&self) -> &'static str {
        "inputs.json"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<super::Written>> {
        write_inputs_json(dir, self.0)?;
        Ok(vec![super::Written::unlisted(dir.join(INPUTS_FILE))])
    }
}

/// `inputs.json`: the exact body of each entry, by session. The bodies are written as the
/// bytes that were sent, not re-encoded.
fn write_inputs_json(dir: &Path, plan: &SendPlan) -> std::io::Result<()> {
    let mut w = BufWriter::new(File::create(dir.join(INPUTS_FILE))?);
    w.write_all(b"{\n  \"data\": [")?;
    for (i, (req, id)) in plan.requests.iter().zip(&plan.conversation_ids).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "\n    {{\"session_id\": \"{id}\", \"payloads\": [")?;
        // A multipart form is listed as JSON (its file in base64), so the file stays JSON.
        match audio_transcription::form_as_json(&req.body) {
            Some(form) => serde_json::to_writer(&mut w, &form)?,
            None => w.write_all(&req.body)?,
        }
        // Later turns as AIPerf lists them: each turn's own body, without the history
        // (which holds replies not known before the run).
        let script = &plan.scripts[i];
        for k in 1..script.turns.len() {
            w.write_all(b", ")?;
            w.write_all(&script.turn_body(k, &[]))?;
        }
        w.write_all(b"]}")?;
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}
