//! AIPerf accepts enum values in any case and with `-` or `_` between words
//! (`--endpoint-type CHAT`, `--custom-dataset-type single-turn`). Before clap parses, each
//! value of an argument with a fixed list of values is rewritten to the list's spelling.
//! The lists come from clap's `Command`, so a new `ValueEnum` needs nothing here.

use clap::Command;
use clap::builder::PossibleValue;
use std::ffi::OsString;

/// `argv` with every enum value of the subcommand's arguments spelled as clap expects, and
/// AIPerf's `-vv` written as `--extra-verbose`.
pub fn normalize(cmd: &Command, argv: Vec<OsString>) -> Vec<OsString> {
    let Some(at) = argv
        .iter()
        .skip(1)
        .position(|a| a.to_str().is_some_and(|s| cmd.find_subcommand(s).is_some()))
        .map(|p| p + 1)
    else {
        return argv;
    };
    let sub = cmd
        .find_subcommand(argv[at].to_str().expect("matched as text"))
        .expect("found above");
    let mut out: Vec<OsString> = argv[..=at].to_vec();
    let mut rest = argv[at + 1..].iter();
    while let Some(token) = rest.next() {
        let Some(text) = token.to_str() else {
            out.push(token.clone());
            continue;
        };
        if text == "--" {
            out.push(token.clone());
            out.extend(rest.cloned());
            break;
        }
        if text == "-vv" && has_long(sub, "extra-verbose") {
            out.push("--extra-verbose".into());
            continue;
        }
        let (flag, inline) = match text.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v)),
            _ => (text, None),
        };
        let Some(arg) = find_arg(sub, flag) else {
            out.push(token.clone());
            continue;
        };
        let values = arg.get_possible_values();
        if values.is_empty() || !arg.get_action().takes_values() {
            out.push(token.clone());
            continue;
        }
        let delimiter = arg.get_value_delimiter();
        match inline {
            Some(v) => out.push(format!("{flag}={}", respell(v, &values, delimiter)).into()),
            None => {
                out.push(token.clone());
                if let Some(value) = rest.next() {
                    out.push(match value.to_str() {
                        Some(v) => respell(v, &values, delimiter).into(),
                        None => value.clone(),
                    });
                }
            }
        }
    }
    out
}

fn has_long(cmd: &Command, long: &str) -> bool {
    cmd.get_arguments().any(|a| a.get_long() == Some(long))
}

/// The argument `flag` (`--long`, a long alias, or `-s`) names.
pub fn find_arg<'a>(cmd: &'a Command, flag: &str) -> Option<&'a clap::Arg> {
    if let Some(long) = flag.strip_prefix("--") {
        return cmd.get_arguments().find(|a| {
            a.get_long() == Some(long)
                || a.get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&long))
        });
    }
    let mut chars = flag.strip_prefix('-')?.chars();
    let (short, None) = (chars.next()?, chars.next()) else {
        return None;
    };
    cmd.get_arguments().find(|a| {
        a.get_short() == Some(short)
            || a.get_all_short_aliases()
                .is_some_and(|aliases| aliases.contains(&short))
    })
}

/// `value` (or each `delimiter`-separated part of it) in the spelling of the value it
/// matches; unchanged when it matches none, so clap reports it with the list.
fn respell(value: &str, values: &[PossibleValue], delimiter: Option<char>) -> String {
    match delimiter {
        Some(d) => value
            .split(d)
            .map(|part| respell_one(part, values))
            .collect::<Vec<_>>()
            .join(&d.to_string()),
        None => respell_one(value, values),
    }
}

fn respell_one(value: &str, values: &[PossibleValue]) -> String {
    let key = spelling_key(value);
    values
        .iter()
        .flat_map(|pv| pv.get_name_and_aliases())
        .find(|name| spelling_key(name) == key)
        .map_or_else(|| value.to_string(), str::to_string)
}

/// What two spellings of one value have in common: lower case, `_` read as `-`.
fn spelling_key(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace('_', "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cmd() -> Command {
        Command::new("aiperf").subcommand(
            Command::new("profile")
                .arg(
                    Arg::new("mode")
                        .long("mode")
                        .visible_alias("pattern")
                        .value_parser(["random-with-replacement", "concurrency_burst"]),
                )
                .arg(Arg::new("level").short('l').value_parser(["trace"]))
                .arg(
                    Arg::new("formats")
                        .long("formats")
                        .value_delimiter(',')
                        .value_parser(["json", "csv"]),
                )
                .arg(Arg::new("name").long("name"))
                .arg(
                    Arg::new("extra")
                        .long("extra-verbose")
                        .action(ArgAction::SetTrue),
                ),
        )
    }

    fn run(args: &[&str]) -> Vec<String> {
        let argv = args.iter().map(OsString::from).collect();
        normalize(&cmd(), argv)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn values_match_in_any_case_and_with_either_separator() {
        assert_eq!(
            run(&["aiperf", "profile", "--mode", "RANDOM_WITH_REPLACEMENT"]),
            ["aiperf", "profile", "--mode", "random-with-replacement"]
        );
        assert_eq!(
            run(&["aiperf", "profile", "--pattern=Concurrency-Burst"]),
            ["aiperf", "profile", "--pattern=concurrency_burst"]
        );
        assert_eq!(
            run(&["aiperf", "profile", "-l", "TRACE"]),
            ["aiperf", "profile", "-l", "trace"]
        );
        assert_eq!(
            run(&["aiperf", "profile", "--formats", "JSON,Csv"]),
            ["aiperf", "profile", "--formats", "json,csv"]
        );
    }

    #[test]
    fn other_values_and_unknown_values_are_left_alone() {
        let args = [
            "aiperf", "profile", "--name", "PNG", "--mode", "bogus", "--", "--mode", "X",
        ];
        assert_eq!(run(&args), args);
        // Before the subcommand nothing is rewritten.
        assert_eq!(run(&["aiperf", "--mode", "X"]), ["aiperf", "--mode", "X"]);
    }

    #[test]
    fn double_v_is_extra_verbose() {
        assert_eq!(
            run(&["aiperf", "profile", "-vv"]),
            ["aiperf", "profile", "--extra-verbose"]
        );
    }
}
