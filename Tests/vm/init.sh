#!/bin/busybox sh
# Tests/vm/init.sh - PID 1 of the QEMU guest that scripts/vm-test boots
# (docs/vm-testing.md). Mounts /proc, /sys and /dev, runs the tests in /t one by one,
# each under its own time limit, then prints the verdict line that scripts/vm-test
# turns into its exit status:
#   LANEPOOL-VM-RESULT: PASS        or   LANEPOOL-VM-RESULT: FAIL <failed steps>
# and powers the guest off. Its settings come from the kernel command line:
#   lanepool.nodes=0-2/3-7   the topology asked of QEMU (vm_test topology checks it)
#   lanepool.tests=a,b,...   the steps to run (default: all, in the order below)
#   lanepool.offline=N       the CPU the offline step takes down
#   lanepool.stress=N        lost wake-up torture round trips
#   lanepool.seeds=N lanepool.rounds=N   the life-cycle interleaving run
#   lanepool.lifecycle_test=NAME  only this life-cycle regression test (and the
#                            interleavings unless seeds=0)
#   lanepool.step_timeout=S  seconds per step
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp && mount -t tmpfs tmpfs /tmp

param() { # param NAME DEFAULT
  for w in $(cat /proc/cmdline); do
    case $w in lanepool.$1=*) echo "${w#*=}"; return ;; esac
  done
  echo "$2"
}

all="topology,numa,cores,holes,offline,numa-unavailable,nonuma,stress,lifecycle,band-rlimit20,band-rlimit15"
tests=$(param tests "$all")
offline=$(param offline 1)
stress=$(param stress 20000)
seeds=$(param seeds 4)
rounds=$(param rounds 1)
lifecycle_test=$(param lifecycle_test "")
step_timeout=$(param step_timeout 300)

echo "guest: kernel $(uname -r), $(nproc) CPUs online ($(cat /sys/devices/system/cpu/online)), nodes:"
for n in /sys/devices/system/node/node[0-9]*; do
  echo "  ${n##*/}: cpus $(cat "$n/cpulist"), $(awk '/MemTotal/ {print $4 " kB"}' "$n/meminfo")"
done

ok=0
bad=""
run() { # run STEP COMMAND...
  step=$1
  shift
  echo "=== guest step $step: $*"
  t0=$(date +%s)
  timeout -s KILL "$step_timeout" "$@"
  rc=$?
  t1=$(date +%s)
  if [ "$rc" = 0 ]; then
    ok=$((ok + 1))
    echo "=== guest step $step: ok ($((t1 - t0)) s)"
  else
    bad="$bad $step"
    [ "$rc" = 137 ] && echo "=== guest step $step: killed after ${step_timeout} s (hang?)"
    echo "=== guest step $step: FAILED, exit $rc ($((t1 - t0)) s)"
  fi
}

for step in $(echo "$tests" | tr , ' '); do
  case $step in
    topology | numa | cores | holes | numa-unavailable) run "$step" /t/vm_test_numa "$step" ;;
    offline) run offline /t/vm_test_numa offline "$offline" ;;
    nonuma) run nonuma /t/vm_test_plain nonuma ;;
    stress) run stress /t/stress_test "$stress" ;;
    lifecycle) run lifecycle /t/lifecycle_test "$seeds" "$rounds" $lifecycle_test ;;
    # escalation and thread bands at uid 65534 with RLIMIT_NICE 20: this guest's root may
    # raise RLIMIT_NICE (CAP_SYS_RESOURCE), which the container CI runs in may not
    band-rlimit20) run band-rlimit20 /t/band_test rlimit20 ;;
    band-rlimit15) run band-rlimit15 /t/band_test rlimit15 ;;
    *) bad="$bad $step(unknown)" ;;
  esac
done

nbad=$(echo $bad | wc -w)
echo "guest steps: $ok passed, $nbad failed"
if [ -z "$bad" ]; then
  echo "LANEPOOL-VM-RESULT: PASS"
else
  echo "LANEPOOL-VM-RESULT: FAIL$bad"
fi
sync
poweroff -f
