#!/usr/bin/env bash
# Submits NeMo RL's own ray.sub, UNMODIFIED, to the dev Slurm cluster with a tiny stand-in driver
# (tests/support/nemo_rl_raysub_driver.py) as COMMAND, waits until the job has ended and prints what happened.
#
#   tests/support/run_nemo_rl_raysub.sh [--exit-code N] [--nodes N] [--dir DIR] [--timeout S] RAY_SUB
#
# ray.sub runs `ray stop` on its nodes, which kills EVERY Ray process of the user on this machine: the whole run,
# from before sbatch until the job has ended, holds an exclusive flock on $SHEPHERD_RAY_LOCK
# (/tmp/shepherd-ray.lock). Keep such runs few.
#
# Needs SLURM_CONF (from scripts/dev-cluster up) and the repo's .venv (scripts/setup; ray[default]).
# DIR (default: a new temp dir) is the submit dir and BASE_LOG_DIR: the job's files are DIR/<jobid>.out and
# DIR/<jobid>-logs/. The job gets the caller's environment (sbatch exports it) plus, unless already set:
#   CONTAINER=dummy        the pyxis stand-in records it; no image is used
#   MOUNTS=DIR:DIR         must not be empty: pyxis (and the stand-in) reject `--container-mounts=`
#   GPUS_PER_NODE=4        the dev nodes advertise gpu:4; ray.sub exits 1 on a mismatch
#   RAY_AUTH_MODE=disabled else `ray status` fails with InvalidAuthToken once ~/.ray/auth_token exists
#   PATH=<repo>/.venv/bin:$PATH   the `ray` and `python` ray.sub and the driver run
# CPUS_PER_WORKER is passed through when set (v0.6.0 defaults it to GPUS_PER_NODE*16 = 64 > the nodes' 8 CPUs).
# Also: SHEPHERD_NRL_ACCOUNT (shepherd), SHEPHERD_NRL_PARTITION (gpu: v0.6.0 needs its overlapping steps).
#
# Prints key=value lines on stdout: job, state, exit_code, seconds (sbatch to final state), dir, log_dir.
# Exit 0 when the job ended (whatever its state); 1 when it could not be submitted or did not end in time
# (it is then cancelled, and waited for, before the lock is released).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCK=${SHEPHERD_RAY_LOCK:-/tmp/shepherd-ray.lock}
if [[ -z ${_SHEPHERD_RAY_LOCKED:-} ]]; then
    _SHEPHERD_RAY_LOCKED=1 exec flock "$LOCK" "${BASH_SOURCE[0]}" "$@"
fi
unset _SHEPHERD_RAY_LOCKED

die() { echo "run_nemo_rl_raysub: $*" >&2; exit 1; }

exit_code=0 nodes=1 dir="" timeout=600
while (( $# > 1 )); do
    case $1 in
        --exit-code) exit_code=$2; shift ;;
        --nodes) nodes=$2; shift ;;
        --dir) dir=$2; shift ;;
        --timeout) timeout=$2; shift ;;
        *) die "unknown option '$1'" ;;
    esac
    shift
done
(( $# == 1 )) || die "usage: $0 [--exit-code N] [--nodes N] [--dir DIR] [--timeout S] RAY_SUB"
ray_sub=$(realpath "$1")
[[ -f $ray_sub ]] || die "no such launch script: $1"
[[ -n ${SLURM_CONF:-} ]] || die "SLURM_CONF is not set (scripts/dev-cluster up prints it)"
[[ -x $REPO/.venv/bin/ray ]] || die "$REPO/.venv/bin/ray is missing (scripts/setup)"
if [[ -z $dir ]]; then dir=$(mktemp -d /tmp/nemo-rl-raysub.XXXXXX); fi
mkdir -p "$dir"
dir=$(realpath "$dir")

export COMMAND="python $REPO/tests/support/nemo_rl_raysub_driver.py --steps 3 --exit-code $exit_code"
export CONTAINER=${CONTAINER-dummy}
export MOUNTS=${MOUNTS-$dir:$dir}
export BASE_LOG_DIR=$dir
export GPUS_PER_NODE=${GPUS_PER_NODE:-4}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
export PATH=$REPO/.venv/bin:$PATH

start=$(date +%s.%N)
job=$(cd "$dir" && sbatch --parsable --nodes="$nodes" --account="${SHEPHERD_NRL_ACCOUNT:-shepherd}" \
        --partition="${SHEPHERD_NRL_PARTITION:-gpu}" --job-name="nemo-rl-raysub-$$" --time=15 \
        -o "$dir/%j.out" "$ray_sub") || die "sbatch failed"
job=${job%%;*}
echo "run_nemo_rl_raysub: job $job ($(basename "$ray_sub"), nodes=$nodes, driver exits $exit_code) in $dir" >&2

final='^(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL|BOOT_FAIL|DEADLINE|PREEMPTED)$'
state="" timed_out=0
while :; do
    state=$(squeue -h -t all -j "$job" -o %T 2>/dev/null || true)
    [[ $state =~ $final ]] && break
    if (( timed_out == 0 )) && (( $(date +%s) - ${start%.*} > timeout )); then
        echo "run_nemo_rl_raysub: job $job not ended after ${timeout}s (state '$state'): cancelling" >&2
        scancel "$job" || true
        timed_out=1
    fi
    sleep 0.5
done
end=$(date +%s.%N)
code=$(scontrol show job -o "$job" | tr ' ' '\n' | sed -n 's/^ExitCode=//p')

echo "job=$job"
echo "state=$state"
echo "exit_code=$code"
echo "seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
echo "dir=$dir"
echo "log_dir=$dir/$job-logs"
(( timed_out == 0 ))
