"""Session-wide fixtures: tiny generated datasets in the real on-disk formats.

They are shared by every test of the session, so tests must not modify them: copy one
(``shutil.copytree``) before corrupting it.
"""
import os
import subprocess

import pytest

from gluontrain.data import synthetic


@pytest.fixture(scope='session')
def voc_root(tmp_path_factory):
    """A tiny VOCdevkit: VOC2007 (16 trainval + 8 test) and VOC2012 (16 trainval), 112-144 px,
    the five default classes. Yields the VOCdevkit path (``VOCDetection``'s ``root``)."""
    root = tmp_path_factory.mktemp('voc')
    return synthetic.write_voc(str(root), num_train=16, num_val=8, seed=0, years=(2007, 2012),
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(112, 144),
                               max_objects=6)


@pytest.fixture(scope='session')
def coco_root(tmp_path_factory):
    """A tiny COCO 2017 layout: 12 train and 6 val images (one val image without annotations),
    112-144 px, the ten default categories. Yields the root (``COCODetection``'s ``root``)."""
    root = tmp_path_factory.mktemp('coco')
    return synthetic.write_coco(str(root), num_train=12, num_val=6, seed=0,
                                image_size=(112, 144))


@pytest.fixture(scope='session')
def vg_root(tmp_path_factory):
    """A tiny Visual Genome scene-graph dataset: 12 train and 6 test images, 144-192 px."""
    root = tmp_path_factory.mktemp('vg')
    return synthetic.write_vg(str(root), num_train=12, num_val=6, seed=0, image_size=(144, 192))


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, options)``: a small tmpfs at ``tmp_path/name`` (a full or read-only disk;
    root only, skipped otherwise), unmounted after."""
    mounted = []

    def mount(name, options):
        path = tmp_path / name
        path.mkdir()
        if os.geteuid() != 0:
            pytest.skip('mounting a small tmpfs needs root')
        res = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(path)],
                             capture_output=True, text=True, check=False)
        if res.returncode:
            pytest.skip('cannot mount a tmpfs here: ' + res.stderr.strip())
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(['umount', '-l', str(path)], check=False)  # lazy: files may be open
