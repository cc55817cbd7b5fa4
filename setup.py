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

setup(
    name='gluontrain',
    version=_version(),
    description='GluonCV / PyTorch detection training scripts as reusable, faithful, tested functions',
    long_description=open(os.path.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['gluontrain', 'gluontrain.*']),
    # gluoncv imports distutils, which Python 3.12 removed.
    python_requires='>=3.8,<3.12',
    install_requires=['numpy', 'Pillow', 'tqdm', 'h5py'],
    extras_require={
        # gluoncv declares opencv-python; installing this extra as-is therefore brings the GUI cv2.
        # The README's commands install gluoncv with --no-deps beside opencv-python-headless.
        'mxnet': ['mxnet==1.9.1', 'gluoncv==0.10.5.post0'] + NUMPY1,
        'cu112': ['mxnet-cu112==1.9.1', 'gluoncv==0.10.5.post0'] + NUMPY1,
        # exact pin: a range pulls the registry's newest torch with several GB of CUDA wheels
        'torch': ['torch==2.13.0', 'pycocotools<2.0.8'],
        'test': ['pytest>=7', 'pytest-timeout', 'nbclient', 'nbformat', 'ipykernel', 'tensorboardX'],
        'tensorboard': ['tensorboardX'],
        'notebook': ['jupyter', 'nbclient', 'nbformat', 'ipykernel', 'matplotlib<3.9'],
    },
    entry_points={'console_scripts': ['gluontrain=gluontrain.__main__:main']},
    classifiers=[
        'Programming Language :: Python :: 3.11',
        'License :: OSI Approved :: Apache Software License',
        'Topic :: Scientific/Engineering :: Image Recognition',
    ],
)
