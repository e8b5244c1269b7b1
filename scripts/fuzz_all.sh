#!/usr/bin/env bash
# Builds the cargo-fuzz targets (fuzz/) and runs each for a number of executions spread over
# parallel libFuzzer workers; prints each target's executions, time and crashes.
#
#   scripts/fuzz_all.sh [-n EXECUTIONS_PER_TARGET] [-w WORKERS] [-b BIN_DIR] [-l MAX_LEN]
#                       [-t SECONDS] [TARGET ...]
#
# Defaults: 10,000,000 executions per target, one worker per core, all three targets
# (gguf_model, tokenizer, chat_template). Building needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`); -b runs the binaries already in BIN_DIR instead (e.g. stripped
# copies taken to a machine without the toolchain); -l caps the input length (libFuzzer's
# -max_len); -t stops each job after SECONDS even short of its share of executions. Sanitizers
# are off (-s none: the targets are safe Rust, whose failures are panics), so executions are fast.
#
# Each target's corpus lives in fuzz/corpus/<target> (kept between runs, not committed), seeded
# from fuzz/seeds/<target> and, for the tokenizer, from the tokenizer cases of the fixtures. The
# executions are split evenly over WORKERS libFuzzer jobs (-jobs=WORKERS -workers=WORKERS
# -runs=EXECUTIONS/WORKERS); the jobs share the corpus. Logs go to fuzz/logs/<target>/; a crashing
# input goes to fuzz/artifacts/<target>/. Reproduce one with
#   fuzz/target/<host>/release/<target> fuzz/artifacts/<target>/<file>
# and, once fixed, commit it to tests/data/fuzz/<target>/ (tests/fuzz_regressions.rs replays it).
set -euo pipefail
cd "$(dirname "$0")/.."

executions=10000000
workers=$(nproc)
bin_dir=
limits=()
while getopts "n:w:b:l:t:h" opt; do
    case $opt in
        n) executions=$OPTARG ;;
        w) workers=$OPTARG ;;
        b) bin_dir=$(cd "$OPTARG" && pwd) ;;
        l) limits+=("-max_len=$OPTARG") ;;
        t) limits+=("-max_total_time=$OPTARG") ;;
        *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf_model tokenizer chat_template)
runs_per_job=$(( (executions + workers - 1) / workers ))

if [ -z "$bin_dir" ]; then
    for target in "${targets[@]}"; do
        cargo +nightly fuzz build -s none "$target"
    done
    bin_dir="$PWD/fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release"
fi

# The tokenizer cases of the fixture and of the real-vocabulary vectors, one file per text.
seed_tokenizer_texts() {
    local corpus=$1
    command -v python3 >/dev/null || return 0
    python3 - "$corpus" <<'PY'
import hashlib, json, pathlib, sys
corpus = pathlib.Path(sys.argv[1])
texts = [case["text"] for case in json.load(open("tests/fixtures/golden.json"))["tokenizer_cases"]]
texts += [case["text"] for case in json.load(open("tests/data/tokenizer/vectors.json"))["cases"]]
for text in texts:
    data = text.encode()
    (corpus / ("case-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)
PY
}

summary=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    logs="fuzz/logs/$target"
    artifacts="fuzz/artifacts/$target"
    mkdir -p "$corpus" "$logs" "$artifacts"
    cp -n fuzz/seeds/"$target"/* "$corpus"/ 2>/dev/null || true
    [ "$target" != tokenizer ] || seed_tokenizer_texts "$corpus"
    rm -f "$logs"/fuzz-*.log
    echo "== $target: $executions executions as $workers jobs of $runs_per_job"
    started=$(date +%s)
    # libFuzzer writes fuzz-<job>.log into the working directory.
    (cd "$logs" && "$bin_dir/$target" "$OLDPWD/$corpus" \
        -runs="$runs_per_job" -jobs="$workers" -workers="$workers" \
        -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 ${limits[@]+"${limits[@]}"} \
        -artifact_prefix="$OLDPWD/$artifacts/" >/dev/null 2>&1) || true
    seconds=$(( $(date +%s) - started ))
    done_runs=$(grep -h 'stat::number_of_executed_units' "$logs"/fuzz-*.log 2>/dev/null |
        awk '{ sum += $2 } END { print sum + 0 }')
    crashes=$(find "$artifacts" -type f | wc -l)
    line="$target: $done_runs executions in ${seconds} s ($(( done_runs / (seconds > 0 ? seconds : 1) )) exec/s), $crashes crashing inputs in $artifacts"
    echo "$line"
    summary+=("$line")
done
echo
printf '%s\n' "${summary[@]}"
