"""The card page: a payload (:mod:`traincard_otel._read.payload`) drawn as one self-contained HTML
page (:mod:`.page`: CSS, the vendored chart library, the card's script and the data inline;
:mod:`.render`). The ``MetaflowCard`` is :mod:`traincard_otel.metaflow.card`."""
