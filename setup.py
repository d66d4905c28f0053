"Packaging for venus_nb: every requirement and the console script are read from settings.ini (nbdev's config)."
from configparser import ConfigParser
import setuptools, shlex

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

def reqs(key): return shlex.split(cfg.get(key, ''))

licenses = dict(apache2='Apache-2.0')   # SPDX: setuptools >= 77 deprecates License :: classifiers
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
lic = licenses[cfg['license']]
min_python = cfg['min_python']

setuptools.setup(
    name=cfg['lib_name'].replace('_', '-'), version=cfg['version'], license=lic,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])], 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title(),
                 'Programming Language :: Python :: 3'],
    url=cfg['git_url'], packages=setuptools.find_packages(include=['venus_nb', 'venus_nb.*']),
    include_package_data=True, install_requires=reqs('requirements'),
    extras_require={'gpu': reqs('gpu_requirements'), 'cpu-engines': reqs('cpu_engines_requirements'),
                    'dev': reqs('dev_requirements'), 'verl': reqs('verl_requirements')},
    python_requires='>=' + min_python, long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown', zip_safe=False,
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f'{cfg["lib_name"]}={cfg["lib_name"]}._modidx:d']},
    author=cfg['author'], author_email=cfg['author_email'], description=cfg['description'],
    keywords=cfg['keywords'])
