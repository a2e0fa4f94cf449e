# The image for every platform pleg's chart runs on, with buildx. From the
# repository's root (bake resolves the context from the working
# directory):
#   docker buildx bake -f deploy/docker-bake.hcl --push
#   VERSION=v0.2.0 REVISION=$(git rev-parse HEAD) docker buildx bake -f deploy/docker-bake.hcl --push

# The release: the chart's appVersion, which its image tag defaults to.
variable "VERSION" {
  default = "v0.1.0"
}

variable "REVISION" {
  default = ""
}

variable "REGISTRY" {
  default = "ghcr.io/plegkit"
}

group "default" {
  targets = ["pleg"]
}

target "pleg" {
  context    = "."
  dockerfile = "deploy/Dockerfile"
  platforms  = ["linux/amd64", "linux/arm64"]
  args = {
    VERSION  = VERSION
    REVISION = REVISION
  }
  tags = ["${REGISTRY}/pleg:${VERSION}"]
}
