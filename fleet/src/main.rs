//! `fleet`: the command line (clap) over the `fleet` library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fleet::verdict::Canary;
use fleet::{Exit, MergeOptions};

/// Merge the SIM_JSON lines of a fleet's shards into one report; triage failing seeds in fresh
/// processes.
#[derive(Parser)]
#[command(name = "fleet", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Merge shards' JSON lines into one report (exit 0 clean, 1 new failures, 2 a canary not
    /// found, 3 bad usage or no input lines)
    ///
    /// Failures are deduplicated by signature; per signature the first and the fastest seed, its
    /// replay line and trace tail. Writes summary.md (within --summary-limit), signatures.json
    /// and outcomes.jsonl into --out.
    Merge {
        /// Report directory.
        #[arg(long, value_name = "DIR", default_value = "fleet-report")]
        out: PathBuf,
        /// A planted bug that must fail at least once (with ORACLE, if given); implies --expected.
        #[arg(long, value_name = "SIMULATION[:ORACLE]")]
        canary: Vec<Canary>,
        /// A simulation whose failures are planted: listed, not new.
        #[arg(long, value_name = "SIMULATION")]
        expected: Vec<String>,
        /// A file of known signatures, one per line (`#` starts a comment line).
        #[arg(long, value_name = "FILE")]
        known: Vec<PathBuf>,
        /// Triage each new signature: K fresh-process replays and K explore-mode seeds.
        #[arg(long, value_name = "K", default_value_t = 0)]
        triage: u32,
        /// Program triage runs instead of the replay line's `cargo … --` command.
        #[arg(long, value_name = "PROGRAM")]
        exec: Option<String>,
        /// Byte limit of summary.md (GitHub's job summary takes at most 1 MiB); at least 1024.
        #[arg(long, value_name = "BYTES", default_value_t = fleet::summary::LIMIT_DEFAULT, value_parser = fleet::summary::parse_limit)]
        summary_limit: usize,
        /// JSON-lines files, or directories searched for *.jsonl and *.json.
        #[arg(value_name = "INPUT", required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Triage failing JSON lines in fresh processes (exit 0 all replay exactly, 1 one does not,
    /// 3 bad usage)
    ///
    /// Per signature, its fastest line's replay line runs K times in fresh processes
    /// ("replays exactly (K of K)" / "replays j of K"), then K explore-mode seeds derived from it
    /// run once ("explore: j of K seeds fail with this signature").
    Triage {
        /// Fresh processes (and explore seeds) per line.
        #[arg(long, value_name = "K", default_value_t = 4)]
        k: u32,
        /// Program to run instead of the replay line's `cargo … --` command.
        #[arg(long, value_name = "PROGRAM")]
        exec: Option<String>,
        /// A JSON line, or a file of JSON lines (each signature's fastest failing line is triaged).
        #[arg(long, value_name = "JSONLINE_FILE_OR_STRING")]
        line: String,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let exit = match cli.command {
        Command::Merge { out, canary, expected, known, triage, exec, summary_limit, inputs } => {
            let options = MergeOptions {
                inputs,
                out: out.clone(),
                canaries: canary,
                expected,
                known,
                triage,
                exec,
                summary_limit,
            };
            match fleet::merge(&options) {
                Ok(run) => {
                    print!("{}", run.console(&out));
                    run.exit()
                }
                Err(e) => {
                    eprintln!("fleet merge: {e}");
                    Exit::Usage
                }
            }
        }
        Command::Triage { k, exec, line } => triage(k, exec.as_deref(), &line),
    };
    ExitCode::from(exit as u8)
}

fn triage(k: u32, exec: Option<&str>, line: &str) -> Exit {
    let targets = match fleet::triage::targets(line) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fleet triage: {e}");
            return Exit::Usage;
        }
    };
    let mut exit = Exit::Clean;
    for target in &targets {
        println!("{} · seed {}", target.signature, target.seed);
        match fleet::triage::triage(target, k, exec) {
            Ok(t) => {
                println!("  ran: {}", t.command);
                println!("  {}", t.replay_label());
                for note in &t.replay_notes {
                    println!("    {note}");
                }
                println!("  {}", t.explore_label());
                if let Some(note) = &t.explore_note {
                    println!("    {note}");
                }
                if !t.exact() {
                    exit = Exit::New;
                }
            }
            Err(e) => {
                eprintln!("fleet triage: {e}");
                return Exit::Usage;
            }
        }
    }
    exit
}
