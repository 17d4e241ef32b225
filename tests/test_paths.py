"""Where lwm keeps its files: the shared-directory fallback of $LWM_HOME is created safely
and refused when anyone else could have prepared it (issue 24, a hostile tester's finding)."""

from __future__ import annotations

import os
import stat

import pytest

from lwm.errors import UnsafePathError
from lwm.paths import own_directory


def test_a_missing_directory_is_created_for_this_user_alone(tmp_path):
    home = own_directory(tmp_path / "lwm-1000")
    st = os.lstat(home)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022
    assert own_directory(home) == home   # and used again as it is


def test_a_planted_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    (tmp_path / "lwm-0").symlink_to(target)
    with pytest.raises(UnsafePathError, match="is a symbolic link.*LWM_HOME"):
        own_directory(tmp_path / "lwm-0")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700 and not any(target.iterdir())


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_of_another_user_is_refused(tmp_path):
    planted = tmp_path / "lwm-0"
    planted.mkdir(mode=0o755)
    os.chown(planted, 12345, 12345)
    with pytest.raises(UnsafePathError, match=r"owned by another user \(uid 12345\)"):
        own_directory(planted)


def test_a_directory_others_can_write_or_a_file_is_refused(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(UnsafePathError, match="writable by others \\(mode 777\\)"):
        own_directory(open_dir)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnsafePathError, match="not a directory"):
        own_directory(tmp_path / "file")
