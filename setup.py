"""trainer-learn: a TensorFlow-1-style static-graph PPO/SAC trainer for ML-Agents users."""
from setuptools import find_packages, setup

setup(
    name="trainer-learn",
    version="0.1.0",
    description="PPO/SAC trainer in TF1 static graphs with multi-device towers, "
    "ML-Agents configs, .demo files and ONNX export",
    python_requires=">=3.10",
    packages=find_packages(include=["trainers", "trainers.*", "envs", "envs.*"]),
    package_data={"envs.demo": ["*.proto"], "envs.unity": ["*.proto"]},
    install_requires=[
        "tensorflow>=2.16,<2.22",
        # TensorFlow's dtype extension. 0.7.0's import takes 0.65-0.69 s on the 2-core
        # machine, 0.6.0's 0.08 s (measured alone, `import ml_dtypes`): every process
        # imports it with TensorFlow. >=0.5.4 for onnx.
        "ml_dtypes>=0.5.4,<0.7",
        "numpy>=1.26",
        "pyyaml>=6.0",
        "protobuf>=4.25",
        "docopt>=0.6.2",
        "gymnasium>=1.0",
        "tensorboard>=2.16",
        "grpcio>=1.48",  # the Unity communicator (also a TensorFlow dependency)
    ],
    extras_require={
        "export": ["tf2onnx>=1.16", "onnxruntime>=1.17"],
        "test": ["pytest>=7", "pytest-timeout>=2", "mypy>=1.10"],
        # Rollout workers on a Ray cluster (env_settings.ray); plain ray: no dashboard, no extras.
        "ray": ["ray>=2"],
        # LunarLander for scripts/benchmark_suite.py (Box2D wheels, no swig build here).
        "box2d": ["gymnasium[box2d]>=1.0"],
    },
    entry_points={
        "console_scripts": [
            "trainer-learn=trainers.cli.learn:main",
            "trainer-demo=trainers.cli.demo:main",
            "trainer-export=trainers.cli.export:main",
        ]
    },
)
