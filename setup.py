"""gluontrain: the classic detection training scripts as reusable, faithful, tested functions."""
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    scope = {}
    with open(os.path.join(HERE, 'gluontrain', '_version.py')) as f:
        exec(f.read(), scope)  # pylint: disable=exec-used
    return scope['__version__']


# The numpy-1 world mxnet 1.9.1 needs; see requirements/constraints-py311.txt for why.
NUMPY1 = ['numpy==1.23.5', 'scipy<1.12', 'pandas<2.1', 'matplotlib<3.9',
          'opencv-python-headless<4.9', 'pycocotools<2.0.8']

# The MXNet stack runs on Python <= 3.11 only (python_requires below says why). On 3.12+ its
# extras ask for a version no index can hold (a local version, which PyPI refuses), so pip
# stops at once with one line naming the package and the Python it needs,
#   ERROR: No matching distribution found for mxnet==0+needs.python.3.11
# where the plain pins send pip into a source build of numpy 1.x (on 3.13: still at it after
# 10 minutes). docs/install.md, "Python 3.12 and 3.13".
PY311 = '; python_version < "3.12"'
NUMPY1_PY311 = [r + PY311 for r in NUMPY1]


def _py311_only(package, pin):
    """``package==pin`` on Python <= 3.11; on 3.12+ the version pip refuses in one line."""
    return ['{}=={}{}'.format(package, pin, PY311),
            '{}==0+needs.python.3.11; python_version >= "3.12"'.format(package)]


# gluoncv 0.10.5.post0's own requirements (its METADATA) minus opencv-python, the GUI build of
# OpenCV: beside opencv-python-headless two wheels would own one cv2 folder, and pip has no way
# to drop a dependency a package declares. So the extras bring everything gluoncv imports and
# gluoncv itself is installed alone: pip install --no-deps gluoncv==0.10.5.post0 (README).
GLUONCV_DEPS = ['tqdm', 'requests', 'matplotlib', 'portalocker', 'Pillow', 'scipy', 'yacs',
                'pandas', 'pyyaml', 'autocfg']

setup(
    name='gluontrain',
    version=_version(),
    description='GluonCV / PyTorch detection training scripts as reusable, faithful, tested functions',
    long_description=open(os.path.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['gluontrain', 'gluontrain.*']),
    # the two-stage recipe's seamseg-style .ini configs are read at run time
    package_data={'gluontrain.torch.frcnn': ['configs/*.ini'],
                  'gluontrain.torch.sgg': ['configs/*.yaml']},
    # The PyTorch backend ('.[torch]') runs on Python 3.11-3.13 (tox envs torch, torch-py313).
    # The MXNet stack ('.[mxnet]', '.[cu112]', '.[horovod]') needs Python <= 3.11: mxnet 1.9.1
    # needs numpy 1.x, which has no wheel for 3.13 (numpy==1.23.5, the pin, none for 3.12),
    # and gluoncv 0.10.5 imports distutils, which Python 3.12 removed. On 3.12+ those extras
    # stop pip in one line (_py311_only) and gluontrain.mx refuses to import in one line.
    python_requires='>=3.8',
    # u-msgpack-python: seamseg's own codec for the ISS dataset's metadata.bin (pure Python)
    install_requires=['numpy', 'Pillow', 'tqdm', 'h5py', 'u-msgpack-python'],
    extras_require={
        # without gluoncv itself, see GLUONCV_DEPS
        'mxnet': _py311_only('mxnet', '1.9.1') + GLUONCV_DEPS + NUMPY1_PY311,
        'cu112': _py311_only('mxnet-cu112', '1.9.1') + GLUONCV_DEPS + NUMPY1_PY311,
        # exact pin: a range pulls the registry's newest torch with several GB of CUDA wheels;
        # the rest is what the PyTorch recipes import (SGB's yacs configs, OpenCV for SSD's
        # augmentations, matplotlib for the curves); with the mxnet extra, NUMPY1 bounds them
        'torch': ['torch==2.13.0', 'pycocotools', 'yacs', 'matplotlib',
                  'opencv-python-headless'],
        # optional: torchvision's compiled NMS / ROIAlign where they give the reference's
        # output (gluontrain.torch.ops.compiled); the release built for the torch pin above
        'torchvision': ['torchvision==0.28.0'],
        'test': ['pytest>=7', 'pytest-timeout', 'pytest-xdist>=3.5', 'nbclient', 'nbformat', 'ipykernel', 'tensorboardX'],
        'tensorboard': ['tensorboardX'],
        # torch.onnx.export (2.13) refuses to run without onnx; onnxruntime runs the exported
        # YOLOv3 (gluontrain.torch.yolo3.export, docs/from_gluoncv.md "Leaving MXNet")
        'onnx': ['onnx', 'onnxruntime'],
        # built from source against the installed mxnet, so install it after the stack and
        # with the flags of docs/distributed.md: HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1
        # HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1
        # pip install --no-build-isolation '.[horovod]'
        'horovod': _py311_only('horovod', '0.28.1'),
        'notebook': ['jupyter', 'nbclient', 'nbformat', 'ipykernel', 'matplotlib<3.9'],
    },
    entry_points={'console_scripts': ['gluontrain=gluontrain.__main__:main']},
    classifiers=[
        'Programming Language :: Python :: 3.11',
        'Programming Language :: Python :: 3.12',
        'Programming Language :: Python :: 3.13',
        'License :: OSI Approved :: Apache Software License',
        'Topic :: Scientific/Engineering :: Image Recognition',
    ],
)
