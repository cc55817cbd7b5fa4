"""The inputs and outputs of ``scripts/eval_yolov3.py``, ``demo_yolov3.py`` and
``export_yolov3.py`` checked before MXNet, PyTorch or OpenCV sees them (numpy and OpenCV only).

Each problem is one ``ValueError`` / ``FileNotFoundError`` naming the argument, the file and
the fix, which :func:`gluontrain.yolo3.infer.cli` prints as one ``error:`` line: a folder,
pipe or device given as a file (a named pipe would block the reader forever), an image that
is empty or that OpenCV cannot decode (MXNet's decoder answers a directory with
``std::bad_alloc``), an exported graph whose symbol file is not MXNet's JSON, an output
folder under a file or on a read-only file system. All images of a demo are checked before
the first picture is written, so a bad one never leaves the good ones without their
``detections.json``.
"""
import json
import os
import stat
import warnings

import numpy as np

from ..core.argtypes import check_input_file, output_dir_problem
from ..data.images import looks_truncated

__all__ = ['input_file_problem', 'image_problem', 'check_images', 'check_output_folder',
           'check_output_file', 'check_exported_graph', 'check_weights_inputs']


def input_file_problem(path):
    """What keeps ``path`` from being read as an input file, or ``None``: missing, a folder,
    not a regular file (a named pipe, socket or device: reading could wait forever), empty.

    Returns
    -------
    str or None
    """
    try:
        st = os.stat(os.path.expanduser(path))
    except FileNotFoundError:
        return 'does not exist'
    except OSError as e:
        return 'cannot be read ({})'.format(e.strerror)
    if stat.S_ISDIR(st.st_mode):
        return 'is a folder, not a file'
    if not stat.S_ISREG(st.st_mode):
        return 'is not a regular file (a named pipe, socket or device, which could block the ' \
            'reader forever)'
    if st.st_size == 0:
        return 'is empty (0 bytes)'
    return None


def image_problem(path):
    """:func:`input_file_problem`, else whether OpenCV (what both backends decode with)
    decodes the file; ``None`` for a good image.

    Returns
    -------
    str or None
    """
    import cv2  # pylint: disable=import-outside-toplevel

    problem = input_file_problem(path)
    if problem:
        return problem
    try:
        data = np.fromfile(os.path.expanduser(path), dtype=np.uint8)
    except OSError as e:
        return 'cannot be read ({})'.format(e.strerror)
    if cv2.imdecode(data, cv2.IMREAD_COLOR) is None:
        return 'is not an image file OpenCV can decode (JPEG, PNG, BMP...)'
    return None


def check_images(paths):
    """Refuse the first image of ``paths`` that cannot be read (:func:`image_problem`); warn,
    once per file, of a JPEG or PNG cut short, which OpenCV decodes with the missing part
    grey (as the references' readers do).

    Raises
    ------
    ValueError
        ``image PATH (a positional argument) PROBLEM; ...``.
    """
    for path in paths:
        problem = image_problem(path)
        if problem:
            raise ValueError('image {} (a positional argument) {}; give an image file, or leave '
                             'it out'.format(path, problem))
        if looks_truncated(path):
            warnings.warn('image {} is cut short (no end marker): OpenCV decodes its missing '
                          'part grey'.format(path), stacklevel=2)


def _writable_problem(folder):
    """Why nothing can be written in ``folder`` (or, when it does not exist yet, in the
    nearest existing folder above it), or ``None``."""
    folder = os.path.abspath(os.path.expanduser(folder))
    while not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
        return 'the folder {} is not writable (read-only file system or permissions)'.format(
            folder)
    return None


def check_output_folder(path, argument):
    """Refuse an output folder that cannot be made or written into, before anything runs.

    Raises
    ------
    ValueError
    """
    problem = output_dir_problem(path) or _writable_problem(path)
    if problem:
        raise ValueError('{} {}: {}; give a folder that can be written (it is created if '
                         'missing)'.format(argument, path, problem))


def check_output_file(path, argument):
    """Refuse an output file path that is a folder, or whose folder cannot be made or
    written into.

    Raises
    ------
    ValueError
    """
    if os.path.isdir(os.path.expanduser(path)):
        raise ValueError('{} {} is a folder; give a file name (e.g. {})'.format(
            argument, path, os.path.join(path, 'model.onnx')))
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    problem = output_dir_problem(folder) or _writable_problem(folder)
    if problem:
        raise ValueError('{} {}: {}; write the file elsewhere'.format(argument, path, problem))


def check_exported_graph(symbol, exported_params):
    """Refuse an exported graph whose files are missing, not files, or whose symbol file is
    not the JSON MXNet's ``export`` writes (``{"nodes": [...], ...}``).

    Raises
    ------
    FileNotFoundError, ValueError
    """
    fix = 'pass the model-symbol.json and model-0000.params that one export wrote'
    for argument, path in (('--symbol', symbol), ('--exported-params', exported_params)):
        problem = input_file_problem(path)
        if problem:
            error = FileNotFoundError if problem == 'does not exist' else ValueError
            raise error('{} {} {}; {}'.format(argument, path, problem, fix))
    try:
        with open(os.path.expanduser(symbol), 'rb') as f:
            graph = json.loads(f.read().decode('utf-8'))
    except (UnicodeDecodeError, ValueError):
        graph = None
    if not isinstance(graph, dict) or not isinstance(graph.get('nodes'), list):
        raise ValueError('--symbol {} is not an MXNet symbol file (JSON with "nodes"); {}'
                         .format(symbol, fix))


def check_weights_inputs(args, is_zoo_true):
    """The weights arguments of the inference scripts: ``--params`` (unless it asks for the
    model-zoo file) or the exported graph's two files, checked as files before any loader
    opens them."""
    params = (getattr(args, 'params', '') or '').strip()
    if params and not is_zoo_true(params):
        problem = input_file_problem(params)
        if problem == 'does not exist':
            check_input_file(params, '--params', 'give the .params file a run or GluonCV wrote')
        elif problem:
            raise ValueError('--params {} {}; give the .params file a run or GluonCV wrote'
                             .format(params, problem))
    symbol = getattr(args, 'symbol', '') or ''
    exported = getattr(args, 'exported_params', '') or ''
    if symbol and exported and not params:
        check_exported_graph(symbol, exported)
