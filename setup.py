"""The packages of the wheel: each code folder is one ``bats.*`` package, with every subpackage found in it.

The metadata is in pyproject.toml; only the folder-to-package map needs code, so that a new subpackage
can never be missing from the built wheel (tests/test_packaging.py builds one and checks).
"""

from setuptools import find_packages, setup

FOLDERS = {"bats.common": "common", "bats.master": "master", "bats.worker": "worker",
           "bats.provisioners": "provisioners"}

packages = []
for package, folder in FOLDERS.items():
    packages.append(package)
    packages.extend(f"{package}.{sub}" for sub in find_packages(folder))

# bats/ holds only __main__.py (``python -m bats``); bats stays a namespace package, so the worker-only
# wheel (deploy/worker-wheel/) installs bats.worker and bats.common beside it without a bats/__init__.py
packages.append("bats")

# py.typed: the packages carry their type hints (PEP 561), for type checkers of code that imports them
setup(packages=packages, package_dir={**FOLDERS, "bats": "bats"}, package_data=dict.fromkeys(FOLDERS, ["py.typed"]))
