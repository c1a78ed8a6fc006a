"""A flow whose training step prints, warns and writes to fds 1 and 2 (console capture tests)."""

import os
import sys
import warnings

from metaflow import FlowSpec, current, step, traincard


class ConsoleFlow(FlowSpec):
    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=1, flush_interval=0.5)
    @step
    def train(self):
        from tqdm import tqdm

        print("printed by the train step")
        os.write(1, b"written to fd 1 by the train step\n")
        os.write(2, b"written to fd 2 by the train step\n")
        print("Warning: a warning from the train step", file=sys.stderr)
        for s in tqdm(range(1, 201), mininterval=0, file=sys.stderr):
            current.traincard.metric("loss", 1.0 / s, step=s)
        for s in tqdm(range(40), mininterval=0, file=sys.stderr):
            if s == 30:
                warnings.warn("careful at step 30 of the bar", stacklevel=1)
        print("z" * 50_000)
        print("train step done", flush=True)
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    ConsoleFlow()
