//! Setting one `profile` flag in a command line: every spelling of it already there is
//! taken out, then `--long=value` (or the bare switch) goes at the end. Recipe points and
//! `--variant` scenarios are command lines built this way, so each is parsed and checked
//! by the same code as a single run.

/// The `profile` argument `key` names: a long name or alias without `--`, in kebab- or
/// snake-case (`request-rate`, `request_rate`).
pub fn find(key: &str) -> Option<clap::Arg> {
    let cmd = crate::cli::command();
    let profile = cmd.find_subcommand("profile")?;
    let long = format!(
        "--{}",
        key.trim().trim_start_matches("--").replace('_', "-")
    );
    crate::cli::find_arg(profile, &long).cloned()
}

/// True when `arg` is a switch (no value).
pub fn is_switch(arg: &clap::Arg) -> bool {
    !arg.get_action().takes_values()
}

/// `argv` without any occurrence of `arg` (with its value, when it takes one).
pub fn remove(argv: &[String], arg: &clap::Arg) -> Vec<String> {
    let Some(start) = argv.iter().position(|a| a == "profile") else {
        return argv.to_vec();
    };
    let names: Vec<String> = arg
        .get_long()
        .into_iter()
        .chain(arg.get_all_aliases().unwrap_or_default())
        .map(|l| format!("--{l}"))
        .chain(arg.get_short().map(|s| format!("-{s}")))
        .collect();
    let takes_value = arg.get_action().takes_values();
    let mut out = argv[..=start].to_vec();
    let mut i = start + 1;
    while i < argv.len() {
        let token = &argv[i];
        if token == "--" {
            out.extend_from_slice(&argv[i..]);
            break;
        }
        let (flag, inline) = match token.split_once('=') {
            Some((f, _)) if f.starts_with('-') => (f, true),
            _ => (token.as_str(), false),
        };
        if names.iter().any(|n| n == flag) {
            i += if takes_value && !inline { 2 } else { 1 };
            continue;
        }
        out.push(token.clone());
        i += 1;
    }
    out
}

/// `argv` with `arg` set to `value` (a switch: `true` types it, `false` leaves it out).
/// `Err` says why the value does not fit a switch.
pub fn set(argv: &[String], arg: &clap::Arg, value: &str) -> Result<Vec<String>, String> {
    let mut out = remove(argv, arg);
    let long = arg.get_long().expect("profile flags have long names");
    if is_switch(arg) {
        match value.to_ascii_lowercase().as_str() {
            "true" => out.push(format!("--{long}")),
            "false" => {}
            _ => return Err(format!("--{long} is a switch: give true or false")),
        }
    } else {
        out.push(format!("--{long}={value}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn set_replaces_every_spelling() {
        let conc = find("concurrency").unwrap();
        let a = argv("aiperf profile -m m --concurrency 4 --isl=9 --concurrency=8");
        assert_eq!(
            set(&a, &conc, "16").unwrap(),
            argv("aiperf profile -m m --isl=9 --concurrency=16")
        );
        let isl = find("isl").unwrap();
        assert_eq!(
            set(&a, &isl, "128").unwrap(),
            argv(
                "aiperf profile -m m --concurrency 4 --concurrency=8 --synthetic-input-tokens-mean=128"
            )
        );
        let rate = find("request_rate").unwrap();
        assert_eq!(rate.get_long(), Some("request-rate"));
        let streaming = find("streaming").unwrap();
        let s = set(
            &argv("aiperf profile --streaming -m m"),
            &streaming,
            "false",
        )
        .unwrap();
        assert_eq!(s, argv("aiperf profile -m m"));
        assert_eq!(
            set(&s, &streaming, "TRUE").unwrap(),
            argv("aiperf profile -m m --streaming")
        );
        assert!(set(&s, &streaming, "4").is_err());
        assert!(find("no-such-flag").is_none());
    }
}
