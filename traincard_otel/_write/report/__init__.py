"""The reporting API the training thread calls: :class:`~.reporter.Reporter` (its per-step calls in
:mod:`.metrics`), :class:`~.phase.Phase` and the evaluation loop's :class:`~.items.ItemMeter`."""
