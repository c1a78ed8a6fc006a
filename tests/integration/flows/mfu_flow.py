"""A hand-written loop training a tiny GPT-2 in a @traincard step, with the model given to
instrument() so the card (and the OTel gauges) have its FLOPs per token and MFU."""

import time

from metaflow import FlowSpec, Parameter, current, step, traincard


class MfuFlow(FlowSpec):
    seconds = Parameter("seconds", default=4.0, help="how long to train")

    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=1, flush_interval=0.5)
    @step
    def train(self):
        import torch
        from tiny_gpt2 import tiny_gpt2

        import traincard_otel

        torch.manual_seed(0)
        model = tiny_gpt2()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tracker = traincard_otel.instrument(opt, model=model)
        end = time.monotonic() + float(self.seconds)
        with current.traincard.phase("train"):
            while time.monotonic() < end:
                ids = torch.randint(0, 64, (8, 32))
                loss = model(input_ids=ids, labels=ids).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                tracker.log(loss=loss.detach(), batch={"input_ids": ids})
        tracker.close()
        time.sleep(2.5)  # a refresh or two after the last step, so the gauges hold the whole run
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    MfuFlow()
