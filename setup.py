"""Installs t2tlite, with the top-level problems/ and hparams/ folders as
t2tlite.problems and t2tlite.hparams."""
import setuptools

setuptools.setup(
    name="t2tlite",
    version="0.1.0",
    description=("The Transformer of 'Attention Is All You Need' as a "
                 "TensorFlow 2 / Keras 3 toolkit in the tensor2tensor "
                 "tradition."),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=(
        setuptools.find_packages(include=["t2tlite", "t2tlite.*"]) +
        ["t2tlite.problems", "t2tlite.hparams"]),
    package_dir={
        "t2tlite.problems": "problems",
        "t2tlite.hparams": "hparams",
    },
    # t2t-serve's page.
    package_data={"t2tlite.serve": ["static/*.html", "static/*.js",
                                    "static/*.css"]},
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.10,<4",
        "tensorflow-datasets>=4.9",
        "sacrebleu>=2.4,<3",
        "sacremoses>=0.1",
        "absl-py>=2.1",
        "sentencepiece>=0.2",
        "numpy>=1.26",
        # TensorFlow's and Keras's numpy types (bfloat16, ...). 0.7.0 takes
        # 0.75 s to import where 0.6.0 takes 0.01 s (it registers its ufunc
        # loops one by one, each a search of those before): a quarter of a
        # command's TensorFlow import (BUILD_NOTES.md, "A lean start").
        "ml_dtypes>=0.5.1,<0.7",
        "matplotlib>=3.8",
    ],
    extras_require={
        # playwright drives the system's chromium in the page tests (its
        # own browser download is never used); ctranslate2 loads the
        # CTranslate2 export in its tests.
        "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5",
                 "playwright>=1.40", "ctranslate2==4.8.5"],
        # t2t-query's gRPC client; pinned to TensorFlow's minor version.
        # t2t-serve: Flask's app served by waitress (a threaded WSGI server),
        # its /metrics through prometheus_client.
        "serving": ["tensorflow-serving-api>=2.21,<2.22", "grpcio>=1.24.3",
                    "flask>=3.0", "waitress>=3.0", "prometheus_client>=0.20"],
        # t2t-exporter --export_format=ctranslate2 (its Python spec API).
        "ctranslate2": ["ctranslate2==4.8.5"],
    },
    entry_points={
        "console_scripts": [
            "t2t-decoder=t2tlite.bin.t2t_decoder:main",
            "t2t-bleu=t2tlite.bin.t2t_bleu:main",
            "t2t-parse-eval=t2tlite.bin.t2t_parse_eval:main",
            "t2t-attention=t2tlite.bin.t2t_attention:main",
            "t2t-datagen=t2tlite.bin.t2t_datagen:main",
            "t2t-trainer=t2tlite.bin.t2t_trainer:main",
            "t2t-avg-checkpoints=t2tlite.bin.t2t_avg_checkpoints:main",
            "t2t-exporter=t2tlite.bin.t2t_exporter:main",
            "t2t-query=t2tlite.bin.t2t_query:main",
            "t2t-serve=t2tlite.bin.t2t_serve:main",
            "t2t-report=t2tlite.bin.t2t_report:main",
            "t2t-score=t2tlite.bin.t2t_score:main",
        ],
    },
)
