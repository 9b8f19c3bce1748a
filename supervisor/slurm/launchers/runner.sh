#!/bin/sh
# Shepherd's job-side runner: runs the driver, and after it exits asks Shepherd whether to run it again inside
# the same Slurm job (a restart in place: Ray, the allocation and the queue position are kept) or to end the job.
#
#   sh runner.sh <driver argv...>
#
# POSIX sh and coreutils only (date, sleep, mv, mkdir, rm), so it runs in any container with nothing installed.
# It runs where the launcher runs the driver (on the head node, after the launcher's Ray start), so Ray's cluster
# stays up between driver runs.
#
# The protocol (docs/policy.md, "Restart in place", is the one description; supervisor/act/inplace.py the
# daemon's side). Every file is written as <name>.tmp and renamed, and a file counts only when its last line is
# `end`: nobody ever trusts a half-written file. K counts driver runs within this job, from 1.
#   $DIR                  $SHEPHERD_RUNNER_DIR, else $BASE_LOG_DIR/<run>-a<attempt>-runner (the Shepherd run and
#                         attempt that submitted the job: runs may share a log dir; a<attempt> without a run id,
#                         <jobid> without either), <run>-a<attempt>-<i>-runner for the i-th start after the first
#                         (a Slurm requeue starts again at run 1 and must not read old words)
#   $DIR/exit-K           the runner's report: run=K, code=<driver's exit code>, at=<epoch s>, end
#   $DIR/word-K           Shepherd's word after run K: word=run (run again) or word=end (end the job), with
#                         attempt=<Shepherd's attempt for run K+1> and delay_s=<seconds to wait first>, end
#   $DIR/run-K.sh         for K >= 2: the command of run K (the rule's fix: environment, arguments, checkpoint),
#                         written by Shepherd before its word, last line `# end`; the runner runs it with sh
#   $DIR/pre-K.sh         optional, for K >= 2: a step to run before run K (e.g. drain a failed worker node out of
#                         the job's Ray cluster: docs/policy.md, "Spare nodes"), written by Shepherd before its
#                         word, last line `# end`; the runner runs it with sh after the backoff, where the driver
#                         runs (Ray's GCS is reachable there), and reports it in $DIR/pre-K: run=K, code=C, end.
#                         A step that fails (or is incomplete) ends the job instead of running run K
#   $DIR/ended            the runner's last word: run=K, code=C, why=word|bound|signal|no-command|pre-failed|
#                         report-failed (its exit-K could not be written: nobody could answer it), end
# A word-K that appears while run K still runs stops it (TERM, then KILL after the grace): Shepherd decided
# on a hang. The job's exit code is the last driver run's.
#
# Environment (all optional):
#   SHEPHERD_RUNNER_DIR        where the files above live (default above)
#   SHEPHERD_RUNNER_WAIT_S     how long to wait for a word after the driver exits (default 600); then the job ends
#                              with the driver's code and says so in the job's output
#   SHEPHERD_RUNNER_POLL_S     how often to look for a word (default 1)
#   SHEPHERD_RUNNER_GRACE_S    TERM -> KILL grace when a word stops a running driver (default 30)
# A TERM, INT, HUP or USR1 (scancel, a time limit's warning) is passed to the driver and ends the job once it
# exits: no word is awaited. USR2 is only passed on.

if [ $# -eq 0 ]; then
    echo "shepherd-runner: no driver command given (usage: sh runner.sh <driver argv...>)" >&2
    exit 2
fi

# The folder is named after what submitted the job, not its Slurm id: NeMo RL's ray.sub (main) unsets every
# SLURM_* variable before it runs the driver. Each start of the script (a requeue starts it again) claims a
# folder of its own with an atomic mkdir: <key>-runner, then <key>-1-runner, <key>-2-runner, ...
if [ -n "${SHEPHERD_ATTEMPT:-}" ]; then key=${SHEPHERD_RUN_ID:+$SHEPHERD_RUN_ID-}a$SHEPHERD_ATTEMPT; else key=${SLURM_JOB_ID:-0}; fi
WAIT_S=${SHEPHERD_RUNNER_WAIT_S:-600}
POLL_S=${SHEPHERD_RUNNER_POLL_S:-1}
GRACE_S=${SHEPHERD_RUNNER_GRACE_S:-30}
if [ -n "${SHEPHERD_RUNNER_DIR:-}" ]; then
    DIR=$SHEPHERD_RUNNER_DIR
    mkdir -p "$DIR" || { echo "shepherd-runner: cannot create $DIR" >&2; exit 2; }
else
    base=${BASE_LOG_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}
    mkdir -p "$base" || { echo "shepherd-runner: cannot create $base" >&2; exit 2; }
    DIR=$base/$key-runner
    i=0
    while ! mkdir "$DIR" 2>/dev/null; do
        i=$((i + 1))
        if [ "$i" -gt 1000 ]; then echo "shepherd-runner: cannot create a folder in $base" >&2; exit 2; fi
        DIR=$base/$key-$i-runner
    done
fi

say() { echo "shepherd-runner [$(date '+%F %T')]: $*"; }

put() {  # put NAME LINE...: NAME written atomically, one line per argument, `end` last
    _f=$1; shift
    { for _l in "$@"; do printf '%s\n' "$_l"; done; echo end; } > "$DIR/$_f.tmp" && mv -f "$DIR/$_f.tmp" "$DIR/$_f"
}

complete() {  # complete FILE [MARK]: true when FILE exists and its last line is MARK (default `end`)
    [ -f "$1" ] || return 1
    _last=
    while IFS= read -r _line || [ -n "$_line" ]; do _last=$_line; done < "$1"
    [ "$_last" = "${2:-end}" ]
}

field() {  # field FILE KEY: the value of KEY=... in FILE
    while IFS='=' read -r _k _v; do
        if [ "$_k" = "$2" ]; then echo "$_v"; return 0; fi
    done < "$1"
    return 1
}

stopping=0
pid=
on_signal() {
    case $1 in TERM | INT | HUP | USR1) stopping=1 ;; esac
    if [ -n "$pid" ]; then kill -s "$1" "$pid" 2>/dev/null; fi
    woke=1
}
for s in TERM INT HUP USR1 USR2; do trap "on_signal $s" "$s"; done

run_driver() {  # run_driver K ARGV...: the driver's exit code in $code
    _k=$1; shift
    "$@" < /dev/null &
    pid=$!
    # A word for this run while it still runs: Shepherd decided on a hang, the run is stopped.
    (
        while :; do
            sleep "$POLL_S" > /dev/null 2>&1  # (killed with the watcher, it must not hold the job's output)
            if complete "$DIR/word-$_k"; then
                say "Shepherd's word came while driver run $_k still runs: stopping it (pid $pid)"
                kill -TERM "$pid" 2>/dev/null
                _t=0
                while [ "$_t" -lt "$GRACE_S" ] && kill -0 "$pid" 2>/dev/null; do
                    sleep 1 > /dev/null 2>&1; _t=$((_t + 1))
                done
                kill -KILL "$pid" 2>/dev/null
                exit 0
            fi
        done
    ) &
    watcher=$!
    woke=1
    while [ "$woke" = 1 ]; do  # a trapped signal ends `wait` early: wait again for the driver itself
        woke=0
        wait "$pid"
        code=$?
    done
    kill -KILL "$watcher" 2>/dev/null  # (a TERM may be ignored where the job was started)
    wait "$watcher" 2>/dev/null
    pid=
}

finish() {  # finish WHY: the job ends with the last driver run's code
    put ended "run=$k" "code=$code" "why=$1"
    exit "$code"
}

k=1
say "driver run $k starting (attempt ${SHEPHERD_ATTEMPT:-?}); Shepherd's files in $DIR"
run_driver "$k" "$@"
while :; do
    say "driver run $k exited with code $code"
    if ! put "exit-$k" "run=$k" "code=$code" "at=$(date +%s)"; then
        # Shepherd cannot learn of this exit (a full or unwritable log filesystem): waiting for its word
        # would only hold the job's nodes for the whole bound.
        say "cannot write $DIR/exit-$k: ending the job with the driver's code $code"
        finish report-failed
    fi
    if [ "$stopping" = 1 ]; then
        say "the job was signalled: ending it with the driver's code $code"
        finish signal
    fi
    say "waiting up to ${WAIT_S}s for Shepherd's word (run again, or end the job)"
    deadline=$(( $(date +%s) + WAIT_S ))
    while ! complete "$DIR/word-$k"; do
        if [ "$stopping" = 1 ]; then
            say "the job was signalled while waiting: ending it with the driver's code $code"
            finish signal
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            say "no word from Shepherd within ${WAIT_S}s: ending the job with the driver's code $code"
            finish bound
        fi
        sleep "$POLL_S"
    done
    word=$(field "$DIR/word-$k" word)
    if [ "$word" != run ]; then
        say "Shepherd's word after driver run $k: end the job (code $code)"
        finish word
    fi
    next=$((k + 1))
    if ! complete "$DIR/run-$next.sh" "# end"; then
        say "Shepherd said run again but $DIR/run-$next.sh is missing or incomplete: ending the job (code $code)"
        finish no-command
    fi
    delay=$(field "$DIR/word-$k" delay_s) || delay=0
    attempt=$(field "$DIR/word-$k" attempt) || attempt=?
    if [ "${delay:-0}" -gt 0 ] 2>/dev/null; then
        say "run again in ${delay}s (Shepherd's backoff)"
        sleep "$delay"
    fi
    if [ "$stopping" = 1 ]; then finish signal; fi
    if [ -e "$DIR/pre-$next.sh" ]; then
        if ! complete "$DIR/pre-$next.sh" "# end"; then
            say "Shepherd's step before driver run $next is incomplete: ending the job (code $code)"
            finish no-command
        fi
        say "running Shepherd's step before driver run $next ($DIR/pre-$next.sh)"
        sh "$DIR/pre-$next.sh" < /dev/null
        pre=$?
        put "pre-$next" "run=$next" "code=$pre"
        if [ "$pre" -ne 0 ]; then
            say "Shepherd's step before driver run $next failed (code $pre): ending the job (code $code)"
            finish pre-failed
        fi
    fi
    if [ "$stopping" = 1 ]; then finish signal; fi
    k=$next
    say "driver run $k starting in place (attempt $attempt)"
    run_driver "$k" sh "$DIR/run-$k.sh"
done
