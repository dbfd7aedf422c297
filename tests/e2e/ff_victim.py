# SPDX-License-Identifier: BSD-3-Clause
"""ff_victim.py - e2e helper (tests/e2e/longjobs.sh): a PyTorch gloo job
(no libdpg inside) whose rank VICTIM is SIGKILLed while the others compute.

    srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 ff_victim.py \
        VICTIM HOLD_S DEATH_FILE

Every rank joins (env://, the variables dpg exports) and runs all_reduces;
before all_reduce #3 the ranks other than VICTIM "compute" (sleep) HOLD_S
seconds, printing "FF-HOLD rank R" before and "FF-HELD rank R" after; rank
VICTIM writes the time of its death (CLOCK_REALTIME) to DEATH_FILE, prints
"FF-VICTIM rank R dies at T" and SIGKILLs itself.  Without fast fail the
others wake after HOLD_S and fail in all_reduce #3 (gloo: peer closed).
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def main():
    victim, hold, death = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    t = torch.ones(1024)
    for i in range(10):
        if i == 3 and rank == victim:
            now = time.time()
            with open(death, "w") as f:
                f.write("%.6f\n" % now)
            print("FF-VICTIM rank %d dies at %.6f" % (rank, now), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if i == 3:
            print("FF-HOLD rank %d" % rank, flush=True)
            time.sleep(hold)
            print("FF-HELD rank %d" % rank, flush=True)
        dist.all_reduce(t)
    print("FF-OK rank %d" % rank, flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
