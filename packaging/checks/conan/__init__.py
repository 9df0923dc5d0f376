"""A stand-in for the few parts of Conan 2's API that dlock's recipes use, for packaging/check only.

Conan is not installed where the check runs. These classes let the recipe's methods run as Conan
would call them and record what they declare; packaging/checks/conan_recipe.py then compares
that with the files the project's own install produces. Nothing here decides a result: file
operations are real, and what is not emulated fails loudly.
"""


class _Settings:
    """settings.os and the like, as plain strings."""

    def __init__(self, values):
        self._values = dict(values)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"setting '{name}' is not defined in the stand-in") from None

    def get_safe(self, name, default=None):
        return self._values.get(name, default)

    def rm_safe(self, name):
        self._values.pop(name, None)


class _Options:
    """options.shared and the like, from the recipe's default_options."""

    def __init__(self, declared, defaults):
        object.__setattr__(self, "_values", {})
        for name, allowed in declared.items():
            value = defaults.get(name)
            if value not in allowed:
                raise ValueError(f"option '{name}': default {value!r} is not one of {allowed}")
            self._values[name] = value

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"option '{name}' is not defined") from None

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"option '{name}' is not defined")
        self._values[name] = value

    def __delattr__(self, name):
        del self._values[name]

    def rm_safe(self, name):
        self._values.pop(name, None)

    def items(self):
        return self._values.items()


class _CppInfo:
    def __init__(self):
        self.properties = {}
        self.libs = []
        self.system_libs = []
        self.requires = []
        self.defines = []
        self.components = _NoComponents()

    def set_property(self, name, value):
        self.properties[name] = value

    def get_property(self, name):
        return self.properties.get(name)


class _NoComponents:
    def __getitem__(self, name):
        raise NotImplementedError("the stand-in does not handle cpp_info.components")


class _Output:
    def info(self, message):
        print(message)

    warning = error = success = highlight = info


class ConanFile:
    name = None
    version = None
    package_type = None
    settings = ()
    options = {}
    default_options = {}
    generators = ()

    def __init__(self, settings, recipe_folder, tested_reference_str=None):
        declared = type(self).options
        self.settings = _Settings(settings)
        self.options = _Options(declared, type(self).default_options)
        self.recipe_folder = recipe_folder
        self.tested_reference_str = tested_reference_str
        self.export_sources_folder = None
        self.source_folder = self.build_folder = self.package_folder = None
        self.generators_folder = None
        self.cpp_info = _CppInfo()
        self.output = _Output()
        # What the recipe declared, for the check.
        self.recorded = {"requires": [], "tool_requires": [], "layout": None, "cppstd": None,
                         "toolchain": None, "deps": False, "cmake": []}

    def requires(self, ref, **traits):
        self.recorded["requires"].append((ref, traits))

    def tool_requires(self, ref, **traits):
        self.recorded["tool_requires"].append((ref, traits))

    def run(self, command, **kwargs):
        raise NotImplementedError("the stand-in does not run commands for a recipe")
