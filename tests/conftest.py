import shutil

import pytest

from lwm.envs.sandbox import bwrap_available

needs_sandbox = pytest.mark.skipif(
    not (shutil.which("bwrap") and shutil.which("tmux") and bwrap_available()),
    reason="bubblewrap/tmux with user namespaces are required (make system-deps)",
)


def pytest_collection_modifyitems(config, items):
    # The sandbox is required in CI: a machine without it must fail loudly there, not skip.
    import os

    if os.environ.get("CI") and not bwrap_available():
        raise pytest.UsageError("CI needs bubblewrap + tmux (make system-deps)")
