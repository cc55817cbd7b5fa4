"""seamseg's ``.ini`` configuration: a defaults file with every section and key, overridden
by the user's file.

seamseg reads ``[defaults, user]`` with one ``configparser`` call, so a misspelt key in the
user file is silently ignored and the default is used. Here the user file is checked first:
an unknown section or key is an error naming the file, the section and the key (and the
closest valid names).
"""
import ast
import configparser
import difflib
import io
import os

__all__ = ['DEFAULTS_FILE', 'load_config', 'config_to_string', 'ConfigError']

DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs',
                             'defaults.ini')

_CONVERTERS = {'struct': ast.literal_eval}


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or names an unknown section/key."""


def _parser():
    return configparser.ConfigParser(allow_no_value=True, converters=_CONVERTERS)


def _read(path, what):
    if not os.path.isfile(path):
        raise ConfigError('{} {} does not exist: pass the path of an .ini file (see {} for '
                          'every key and its default)'.format(what, path, DEFAULTS_FILE))
    parser = _parser()
    try:
        with open(path, encoding='utf-8') as f:
            parser.read_file(f, source=path)
    except configparser.Error as exc:
        raise ConfigError('{} {} is not a valid .ini file: {}'.format(
            what, path, str(exc).replace('\n', ' '))) from None
    return parser


def _suggest(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=3)
    return ' (did you mean {}?)'.format(', '.join(repr(c) for c in close)) if close else ''


def load_config(config_file, defaults_file=DEFAULTS_FILE):
    """Load ``defaults_file`` and override it with ``config_file``, as seamseg's
    ``load_config``, refusing sections and keys the defaults do not have.

    Parameters
    ----------
    config_file : str or None
        The user's ``.ini``; ``None`` gives the defaults alone.
    defaults_file : str
        The file that lists every section and key with its default.

    Returns
    -------
    configparser.ConfigParser
        With seamseg's ``getstruct`` converter (``ast.literal_eval``).

    Raises
    ------
    ConfigError
        A file is missing or malformed, or ``config_file`` has a section or key that
        ``defaults_file`` lacks.
    """
    defaults = _read(defaults_file, 'Defaults file')
    if config_file is not None:
        user = _read(config_file, 'Configuration file')
        for section in user.sections():
            if not defaults.has_section(section):
                raise ConfigError('Configuration file {}: unknown section [{}]{}; valid '
                                  'sections: {}'.format(config_file, section,
                                                        _suggest(section, defaults.sections()),
                                                        ', '.join(defaults.sections())))
            for key in user[section]:
                if key not in defaults[section]:
                    raise ConfigError('Configuration file {}: unknown key {!r} in section [{}]{}; '
                                      'the keys of [{}] are listed in {}'.format(
                                          config_file, key, section,
                                          _suggest(key, defaults[section]), section,
                                          defaults_file))
        if user.defaults():
            raise ConfigError('Configuration file {}: a [DEFAULT] section would apply its keys to '
                              'every section; put them in the section they belong to'
                              .format(config_file))
    config = _parser()
    config.read([defaults_file] + ([config_file] if config_file is not None else []),
                encoding='utf-8')
    return config


def config_to_string(config):
    """The configuration as ``.ini`` text (what seamseg stores in its snapshots).

    Parameters
    ----------
    config : configparser.ConfigParser

    Returns
    -------
    str
    """
    with io.StringIO() as sio:
        config.write(sio)
        return sio.getvalue()
