FROM local/debian:bookworm
COPY host-ca.crt /usr/local/share/ca-certificates/host-ca.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 \
      python3-venv && update-ca-certificates && rm -rf /var/lib/apt/lists/*
# NVIDIA's real CUDA compiler, headers and cuobjdump, from PyPI, where a CUDA devel image
# has them: /usr/local/cuda/{bin,include,lib}
RUN python3 -m venv /opt/cudatk && /opt/cudatk/bin/pip install --no-cache-dir \
      nvidia-cuda-nvcc==13.2.51 nvidia-nvvm==13.2.51 nvidia-cuda-crt==13.2.51 nvidia-cuda-runtime==13.2.51 nvidia-cuda-cuobjdump==13.2.51 \
 && ln -s /opt/cudatk/lib/python3.11/site-packages/nvidia/cu13 /usr/local/cuda \
 && /usr/local/cuda/bin/nvcc --version
