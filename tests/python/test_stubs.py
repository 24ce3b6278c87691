"""The type stubs that ship beside the extension: present, valid Python, and describing its API."""

import ast
import os

import ember


def test_stubs_and_marker_ship_beside_the_extension():
    folder = os.path.dirname(ember._ember.__file__)
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    with open(os.path.join(folder, "_ember.pyi")) as f:
        tree = ast.parse(f.read())
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"Tensor", "dtype", "device"} <= classes
    assert {"randn", "zeros", "from_dlpack", "matmul"} <= functions
    tensor = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tensor")
    methods = {node.name for node in tensor.body if isinstance(node, ast.FunctionDef)}
    assert {"__add__", "__getitem__", "to", "sum"} <= methods
