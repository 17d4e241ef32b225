"""``python -m lwm.cli …`` (and ``accelerate launch -m lwm.cli train sft …``): the ``lwm`` command."""

from lwm.cli import app

app(prog_name="lwm")
