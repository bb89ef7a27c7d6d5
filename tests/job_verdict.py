#!/usr/bin/python3
"""The verdict on one job (docs/testing.md, "How a multi-rank test is judged").

Runs COMMAND (chorusrun, mpirun, or a script that launches jobs), passes its
output (stdout and stderr, merged) through as it comes, and exits 0 only if

  * the job exited with the expected status (--status, default 0),
  * every rank 0..N-1 printed its pass line (--ranks N, --pass-line), and
  * every --require pattern matched the output and no --forbid pattern did.

Otherwise it exits 1 and says why on its last lines, naming each rank that
did not pass. ctest's PASS_REGULAR_EXPRESSION ignores the exit status, so a
job whose rank crashes after another rank printed the summary would pass on
it; this wrapper is how multi-rank tests are judged instead.

A pass line is a regular expression in which "{rank}" stands for the rank
number, e.g. "chorus-matrix: rank {rank} passed". chorusrun prefixes each
line of rank R with "[R] "; that prefix is stripped before matching, and a
line whose prefix names another rank does not count (a rank cannot pass for
another). Under mpirun, or chorusrun --no-tag-output, lines have no prefix:
the rank number inside the line is what counts.

Patterns are Python regular expressions searched in the whole output with
re.MULTILINE and re.DOTALL ("." crosses lines, as in CMake's regexes).

If the job exits with --skip-status (e.g. 77, ctest's SKIP_RETURN_CODE), the
verdict exits with that status too, so a step that could not run shows as
skipped, never as passed.
"""
import argparse
import re
import signal
import subprocess
import sys

TAG = re.compile(r"^\[(\d+)\] ?")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="job_verdict.py",
        description=__doc__.split("\n\n")[0],
        epilog="Example: job_verdict.py --ranks 3 --pass-line 'chorus-matrix: rank {rank} passed' "
        "--require 'cases, 0 failed' -- chorusrun -n 3 chorus-matrix",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=0, help="ranks 0..N-1 must each print the pass line")
    parser.add_argument("--pass-line", help='regex of one rank\'s pass line; "{rank}" is the rank number')
    parser.add_argument("--status", type=int, default=0, help="expected exit status of the job (default 0)")
    parser.add_argument("--require", action="append", default=[], help="regex the output must match (repeatable)")
    parser.add_argument("--forbid", action="append", default=[], help="regex the output must not match (repeatable)")
    parser.add_argument("--skip-status", type=int, help="a job exiting with this status is skipped: exit with it too")
    parser.add_argument("--name", default="", help="what to call the job in the verdict (default: the command)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command that runs the job")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given (put it after --)")
    if args.ranks < 0:
        parser.error("--ranks must not be negative")
    if args.ranks > 0 and not args.pass_line:
        parser.error("--ranks needs --pass-line")
    if args.pass_line and "{rank}" not in args.pass_line:
        parser.error('--pass-line must contain "{rank}"')
    for pattern in [args.pass_line or "{rank}"] + args.require + args.forbid:
        try:
            re.compile(pattern.replace("{rank}", "0"))
        except re.error as error:
            parser.error(f"bad regular expression {pattern!r}: {error}")
    return args


def describe_status(status):
    if status > 128 and status - 128 < signal.NSIG:
        try:
            return f"{status} (signal {signal.Signals(status - 128).name})"
        except ValueError:
            pass
    return str(status)


def ranks_passed(lines, pattern, ranks):
    """The set of ranks whose pass line is among `lines`."""
    matchers = [re.compile(pattern.replace("{rank}", str(r))) for r in range(ranks)]
    passed = set()
    for line in lines:
        tag = TAG.match(line)
        text = line[tag.end():] if tag else line
        for rank, matcher in enumerate(matchers):
            if rank in passed or not matcher.search(text):
                continue
            if tag and int(tag.group(1)) != rank:
                continue  # printed by another rank: it cannot pass for this one
            passed.add(rank)
    return passed


def main(argv):
    args = parse_args(argv)
    name = args.name or " ".join(args.command[:1])
    lines = []
    try:
        job = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as error:
        print(f"job_verdict: FAILED: cannot start {args.command[0]}: {error}", flush=True)
        return 1
    # Pass the output through as it comes: a test that hangs shows how far it got.
    for raw in job.stdout:
        line = raw.decode("utf-8", errors="replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line.rstrip("\n"))
    status = job.wait()
    if status < 0:  # killed by a signal, as a shell reports it
        status = 128 - status
    output = "\n".join(lines)

    if args.skip_status is not None and status == args.skip_status:
        print(f"job_verdict: SKIPPED: {name} exited {status}, the skip status", flush=True)
        return status

    problems = []
    if status != args.status:
        problems.append(f"exit status {describe_status(status)}, expected {args.status}")
    if args.ranks:
        passed = ranks_passed(lines, args.pass_line, args.ranks)
        missing = [r for r in range(args.ranks) if r not in passed]
        for rank in missing:
            problems.append(f"rank {rank} did not print its pass line ({args.pass_line.replace('{rank}', str(rank))})")
    for pattern in args.require:
        if not re.search(pattern, output, re.MULTILINE | re.DOTALL):
            problems.append(f"no output matches the required {pattern!r}")
    for pattern in args.forbid:
        found = re.search(pattern, output, re.MULTILINE | re.DOTALL)
        if found:
            problems.append(f"the output matches the forbidden {pattern!r}: {found.group(0)[:200]!r}")

    if problems:
        for problem in problems:
            print(f"job_verdict: FAILED: {name}: {problem}", flush=True)
        return 1
    ranks = f", {args.ranks} ranks printed their pass line" if args.ranks else ""
    print(f"job_verdict: OK: {name} exited {status}{ranks}"
          f"{', required output found' if args.require else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
