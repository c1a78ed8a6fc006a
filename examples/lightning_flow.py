"""A tiny Lightning model trained in a Metaflow step with the live card (`@traincard` alone).

python examples/lightning_flow.py run
"""

from metaflow import FlowSpec, step, traincard


class LightningFlow(FlowSpec):
    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=2)
    @step
    def train(self):
        import lightning.pytorch as pl
        import torch

        class Regressor(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(
                    torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
                )

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self.net(x), y)
                self.log("train_loss", loss)
                return loss

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters(), lr=1e-2)

        def loader(seed):
            g = torch.Generator().manual_seed(seed)
            x = torch.randn(2048, 8, generator=g)
            return torch.utils.data.DataLoader(
                torch.utils.data.TensorDataset(x, x.pow(2).sum(1, keepdim=True)), batch_size=64
            )

        trainer = pl.Trainer(
            max_epochs=5,
            log_every_n_steps=5,
            accelerator="cpu",
            enable_progress_bar=False,
            callbacks=[pl.callbacks.ModelCheckpoint(monitor="val_loss", save_top_k=2)],
        )
        trainer.fit(Regressor(), loader(0), loader(1))
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    LightningFlow()
