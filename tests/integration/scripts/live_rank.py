"""A live single-process job that reports a few steps, then waits in ``serve_forever`` until
killed: ``traincard stacks`` asks it where it is through its store."""

import threading

import traincard_otel


def serve_forever() -> None:
    threading.Event().wait()


reporter = traincard_otel.configure()
for step in range(1, 6):
    reporter.step_end(step, duration_s=0.01)
reporter.flush()
print("ready", flush=True)
serve_forever()
