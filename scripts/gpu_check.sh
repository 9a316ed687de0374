#!/usr/bin/env bash
# GPU check (under 5 minutes on one H100): each task trained for a fixed number of steps with the same seed,
# in bf16-mixed (trainer=gpu) and in fp32 (trainer=gpu trainer.precision=32-true), and with 2-device DDP
# (trainer=ddp trainer.devices=2) where nvidia-smi lists two or more GPUs; each run decodes two test batches
# with the task's beam search. scripts/gpu_check_report.py then prints step time, target tokens/s, peak
# memory, MFU, the test metric and the bf16 loss curve against the fp32 one.
#
#   scripts/gpu_check.sh                                   # on a GPU machine: every task, OUT=outputs/gpu_check
#   TASKS=mt STEPS=50 scripts/gpu_check.sh                 # one task, fewer steps
#   ACCELERATOR=cpu STEPS=4 OMP_NUM_THREADS=1 scripts/gpu_check.sh   # smoke test of the script on the CPU
#
# Settings, each an environment variable:
#   ACCELERATOR  gpu (default) or cpu: cpu maps trainer=gpu to trainer=cpu with the same precision
#   TASKS        the tasks, in order (default "mt caption asr")
#   STEPS        the training steps of every task (default: STEPS_<TASK> below)
#   DDP          auto (default: with two or more GPUs), 1 (also on the CPU: 2 gloo processes) or 0
#   OUT          the folder of the runs (default outputs/gpu_check); each run in $OUT/<task>-<variant>
#   PYTHON       the interpreter (default .venv/bin/python)
#   EXTRA        more Hydra overrides for every run (split on spaces), e.g. smaller models for a test
#   RUN_TIMEOUT  seconds one run may take before it is stopped (default 90 on a GPU, 1800 on the CPU)
#   BUDGET       seconds for all the runs (default 280 on a GPU, 0 = none on the CPU): a run gets at most
#                what is left, and the runs after the budget is spent are skipped (shown as such)
#   REPORT_ARGS  arguments of gpu_check_report.py (split on spaces), e.g. "--warmup 10 --peak-flops 989e12"
#
# Step budget (estimated; no GPU was at hand to measure it): 6 runs (9 with DDP) in under 5 minutes, about
# 40 s a run. A run's fixed cost (imports, data set-up, 2 greedy validation and 2 beam-search test batches)
# was 8-13 s a run on this project's 2-core CPU with STEPS=2 (mt 11-13, caption 8-9, asr 12-13 s, the 2 steps
# included); call it 15-20 s on the GPU machine with CUDA start-up and DDP's second process. A step of these
# small models is launch-bound on a GPU: the profiler counts about 1,500 operators a training step for mt,
# 1,000 for caption and 15,700 for asr (its decoder and location-aware attention run step by step), fewer
# kernels for mt and caption where cuDNN fuses the RNNs; at about 10 us each, some 15 ms a step for mt and
# caption and 150 ms for asr. So mt and caption at 300 steps take about 5 s of steps, asr at 150 about 25 s:
# 20, 20 and 45 s a run, 170 s for the 6 runs, about 270 s with DDP. BUDGET stops the script from running over.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS_MT=300
STEPS_CAPTION=300
STEPS_ASR=150
VARIANTS_ONE_DEVICE="bf16 fp32"     # each a run of every task; ddp is added by DDP
SEED=1234
VAL_BATCHES=2                       # greedy search, once at the end of training
TEST_BATCHES=2                      # the task's beam search, after training
# overrides added to every variant (none needed: Seq2Seq clips gradients itself under bf16-mixed, so the
# default fused AdamW works in both precisions)
WORKAROUNDS=""

ACCELERATOR=${ACCELERATOR:-gpu}
TASKS=${TASKS:-"mt caption asr"}
DDP=${DDP:-auto}
OUT=${OUT:-outputs/gpu_check}
PYTHON=${PYTHON:-.venv/bin/python}
EXTRA=${EXTRA:-}
REPORT_ARGS=${REPORT_ARGS:-}
if [[ $ACCELERATOR == gpu ]]; then RUN_TIMEOUT=${RUN_TIMEOUT:-90}; BUDGET=${BUDGET:-280}
else RUN_TIMEOUT=${RUN_TIMEOUT:-1800}; BUDGET=${BUDGET:-0}; fi
case $ACCELERATOR in gpu|cpu) ;; *) echo "gpu_check.sh: ACCELERATOR must be gpu or cpu, not '$ACCELERATOR'" >&2; exit 2;; esac

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
if [[ $ACCELERATOR == gpu && $gpus -lt 1 ]]; then
    echo "gpu_check.sh: nvidia-smi lists no GPU; ACCELERATOR=cpu runs the check on the CPU" >&2
    exit 2
fi
variants=$VARIANTS_ONE_DEVICE
if [[ $DDP == 1 || ($DDP == auto && $ACCELERATOR == gpu && $gpus -ge 2) ]]; then variants="$variants ddp"; fi

steps_of() {  # the training steps of a task
    if [[ -n ${STEPS:-} ]]; then echo "$STEPS"; return; fi
    case $1 in mt) echo $STEPS_MT;; caption) echo $STEPS_CAPTION;; asr) echo $STEPS_ASR;;
        *) echo "gpu_check.sh: unknown task '$1' (mt, caption, asr)" >&2; exit 2;; esac
}

trainer_overrides() {  # the trainer of a variant on this accelerator
    case $ACCELERATOR-$1 in
        gpu-bf16) echo "trainer=gpu";;                                  # bf16-mixed
        gpu-fp32) echo "trainer=gpu trainer.precision=32-true";;
        gpu-ddp)  echo "trainer=ddp trainer.devices=2";;                # bf16-mixed on 2 GPUs
        cpu-bf16) echo "trainer=cpu trainer.precision=bf16-mixed";;    # Lightning autocasts to bf16 on the CPU
        cpu-fp32) echo "trainer=cpu trainer.precision=32-true";;
        cpu-ddp)  echo "trainer=ddp trainer.accelerator=cpu trainer.devices=2 trainer.precision=bf16-mixed";;
    esac
}

mkdir -p "$OUT"
echo "gpu_check: accelerator=$ACCELERATOR ($gpus GPU(s) listed), tasks: $TASKS, variants: $variants -> $OUT"
started=$(date +%s.%N)
failed=0
for task in $TASKS; do
    steps=$(steps_of "$task")
    for variant in $variants; do
        dir="$OUT/$task-$variant"
        rm -rf "$dir"
        mkdir -p "$dir"
        # shellcheck disable=SC2046,SC2086  # the override lists split on spaces on purpose
        args=(
            task="$task" $(trainer_overrides "$variant") seed=$SEED logger=csv
            trainer.max_steps="$steps" trainer.max_epochs=-1 trainer.max_time=null
            trainer.limit_train_batches=null trainer.limit_val_batches=$VAL_BATCHES
            trainer.check_val_every_n_epoch=null trainer.val_check_interval="$steps"  # one validation, at the end
            run_test=true trainer.limit_test_batches=$TEST_BATCHES
            trainer.log_every_n_steps=1 trainer.enable_checkpointing=false
            callbacks.model_checkpoint=null callbacks.last_checkpoint=null callbacks.step_checkpoint=null
            callbacks.attention_plots=null callbacks.time_budget=null
            # every step's wall time (CUDA-synchronised) and target tokens: train/time, train/samples in the CSV
            +callbacks.step_times._target_=lightning.pytorch.callbacks.ThroughputMonitor
            +callbacks.step_times.batch_size_fn._target_=benchmarks.setup.target_tokens
            +callbacks.step_times.batch_size_fn._partial_=true  # batch["num_target_tokens"]
            # on a GPU torch.cuda.memory_stats() every step: allocated_bytes.all.peak (on the CPU it logs nothing)
            +callbacks.device_stats._target_=lightning.pytorch.callbacks.DeviceStatsMonitor
            +callbacks.device_stats.cpu_stats=false
            hydra.run.dir="$dir"
        )
        # shellcheck disable=SC2206
        args+=($WORKAROUNDS $EXTRA)
        smi_pid=""
        if [[ $gpus -ge 1 && $ACCELERATOR == gpu ]]; then  # memory used on each GPU, every 200 ms
            nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader,nounits -lms 200 \
                >"$dir/nvidia_smi.csv" 2>/dev/null &
            smi_pid=$!
        fi
        limit=$RUN_TIMEOUT
        if [[ $BUDGET -gt 0 ]]; then  # what is left of the budget, if less
            left=$(awk "BEGIN { printf \"%d\", $BUDGET - ($(date +%s.%N) - $started) }")
            if [[ $left -lt $limit ]]; then limit=$left; fi
        fi
        echo "== $task-$variant: $steps steps"
        t0=$(date +%s.%N)
        rc=0
        if [[ $limit -lt 15 ]]; then
            rc=-1  # skipped
            echo "   skipped: ${BUDGET}s budget spent (BUDGET=0: none)"
        else
            timeout --signal=TERM --kill-after=15 "$limit" "$PYTHON" train.py "${args[@]}" >"$dir/stdout.log" 2>&1 \
                || rc=$?
        fi
        t1=$(date +%s.%N)
        if [[ -n $smi_pid ]]; then kill "$smi_pid" 2>/dev/null || true; wait "$smi_pid" 2>/dev/null || true; fi
        wall=$(awk "BEGIN { print $t1 - $t0 }")
        printf '{"task": "%s", "variant": "%s", "steps": %s, "accelerator": "%s", "rc": %s, "wall_seconds": %.1f}\n' \
            "$task" "$variant" "$steps" "$ACCELERATOR" "$rc" "$wall" >"$dir/gpu_check.json"
        if [[ $rc -gt 0 ]]; then
            failed=$((failed + 1))
            echo "   FAILED (exit status $rc$([[ $rc -eq 124 ]] && echo ": stopped after ${limit}s")); the end of $dir/stdout.log:"
            tail -n 15 "$dir/stdout.log" | sed 's/^/   | /'
        elif [[ $rc -eq 0 ]]; then
            printf '   %.1f s\n' "$wall"
        fi
    done
done
total=$(awk "BEGIN { print $(date +%s.%N) - $started }")
printf 'gpu_check: the runs took %.0f s\n\n' "$total"
# shellcheck disable=SC2086
"$PYTHON" scripts/gpu_check_report.py "$OUT" $REPORT_ARGS | tee "$OUT/report.md"
if [[ $failed -gt 0 ]]; then echo "gpu_check: $failed run(s) failed" >&2; exit 1; fi
if grep -qs '"rc": -1' "$OUT"/*/gpu_check.json; then echo "gpu_check: runs skipped (BUDGET)" >&2; exit 1; fi
