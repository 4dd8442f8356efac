#!/bin/bash
# One call for a change to the fused PPO trainer's speed: the fused and trainer GPU tests
# (8 workers), scripts/profile_train.py on CartPole at 2,048 and 16,384 envs (16 steps, as
# the PureJaxRL comparison) as BEFORE_TREE (default .bench-head, carried) trains and as this
# tree does, then PPO CartPole against PureJaxRL's throughput (3 alternating runs a side;
# carry .whl for flax/optax). TESTS=0 skips the tests, PROFILE_SIZES="" the profiles.
#   bash scripts/lab/gpu_fused_speed.sh      (it sources .device-kit/setup.sh itself)
# Output: $OUT/fused_speed.tar.gz.
source .device-kit/setup.sh > /tmp/setup.log 2>&1
d=/tmp/fused_speed; rm -rf $d; mkdir -p $d; trap "tar czf $OUT/fused_speed.tar.gz -C /tmp fused_speed" EXIT
export PYTHONUNBUFFERED=1
git log --oneline -1
[ "${TESTS:-1}" = 0 ] || timeout 280 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider tests/train/test_fused_gpu.py tests/train/test_gpu.py > $d/tests.log 2>&1
echo "tests: $(tail -1 $d/tests.log) ($SECONDS s)"; grep -E "^FAILED|^ERROR" $d/tests.log | head
source scripts/lab/earlier_tree.sh; before="${BEFORE_TREE:-.bench-head}"; link_earlier_tree "$before"
for n in ${PROFILE_SIZES-2048 16384}; do
  (cd "$before" && PYTHONPATH="$PWD" timeout 100 python3 scripts/profile_train.py cartpole_ppo "$d/before_prof_$n.json" --set trainer.num_envs=$n --set ppo.num_steps=16 --iterations 10 > "$d/before_prof_$n.log" 2>&1)
  timeout 100 python3 scripts/profile_train.py cartpole_ppo "$d/prof_$n.json" --set trainer.num_envs=$n --set ppo.num_steps=16 --iterations 10 > "$d/prof_$n.log" 2>&1
  grep -h "steps/s" "$d/before_prof_$n.log" "$d/prof_$n.log" | cut -c1-160
done
echo "profiles done ($SECONDS s)"
source .device-kit/peers/setup.sh
for mod in flax optax chex msgpack treescope absl toolz; do
  python3 -c "import $mod" 2>/dev/null && continue
  wheel=$(ls .whl/"${mod/absl/absl_py}"-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$PEERS_PATH" "$wheel"
done
PYTHONPATH=$PEERS_PATH timeout $((560-SECONDS)) python3 scripts/bench_vs_purejaxrl.py $d/vs_purejaxrl.json --sizes 2048,16384 --repeats 3 --modes throughput > $d/vs_purejaxrl.log 2>&1
echo "purejaxrl exit $? ($SECONDS s)"; tail -8 $d/vs_purejaxrl.log | cut -c1-200
