# Joiner node AMIs: the EKS-optimized Amazon Linux 2023 and Amazon Linux 2
# AMIs with the joiner rpm installed and its units enabled. See README
# ("Building a Joiner AMI"). Build both:
#   make package PKG_ARCH=amd64
#   packer init packaging/packer
#   packer build -var kubernetes_version=1.33 -var rpm=dist/joiner-0.1.0-1.x86_64.rpm packaging/packer
# or one: packer build -only='joiner.amazon-ebs.al2023' ... packaging/packer

packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.3.0"
    }
  }
}

variable "region" {
  type    = string
  default = "us-west-2"
}

variable "kubernetes_version" {
  type        = string
  description = "EKS minor version of the base AMI, e.g. 1.33"
}

variable "arch" {
  type        = string
  default     = "x86_64"
  description = "x86_64 or arm64 (the rpm must match: PKG_ARCH=amd64 or arm64)"
}

variable "instance_type" {
  type    = string
  default = "m7i.large"
}

variable "rpm" {
  type        = string
  description = "path of the joiner rpm built by make package, e.g. dist/joiner-0.1.0-1.x86_64.rpm"
}

variable "ami_name_prefix" {
  type    = string
  default = "joiner-eks"
}

locals {
  timestamp = regex_replace(timestamp(), "[- TZ:]", "")
  # EKS-optimized AMI name patterns published by AWS.
  al2023_name = "amazon-eks-node-al2023-${var.arch}-standard-${var.kubernetes_version}-v*"
  al2_name    = var.arch == "arm64" ? "amazon-eks-arm64-node-${var.kubernetes_version}-v*" : "amazon-eks-node-${var.kubernetes_version}-v*"
  tags = {
    "joiner.io/ami"          = "true"
    "joiner.io/k8s-version"  = var.kubernetes_version
    "joiner.io/built-by"     = "packer"
  }
}

source "amazon-ebs" "al2023" {
  region        = var.region
  instance_type = var.instance_type
  ssh_username  = "ec2-user"
  ami_name      = "${var.ami_name_prefix}-al2023-${var.arch}-${var.kubernetes_version}-${local.timestamp}"
  source_ami_filter {
    filters = {
      name                = local.al2023_name
      architecture        = var.arch
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["amazon"]
    most_recent = true
  }
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
  tags = merge(local.tags, { "joiner.io/ami-family" = "AL2023" })
}

source "amazon-ebs" "al2" {
  region        = var.region
  instance_type = var.instance_type
  ssh_username  = "ec2-user"
  ami_name      = "${var.ami_name_prefix}-al2-${var.arch}-${var.kubernetes_version}-${local.timestamp}"
  source_ami_filter {
    filters = {
      name                = local.al2_name
      architecture        = var.arch
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["amazon"]
    most_recent = true
  }
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
  tags = merge(local.tags, { "joiner.io/ami-family" = "AL2" })
}

build {
  name    = "joiner"
  sources = ["source.amazon-ebs.al2023", "source.amazon-ebs.al2"]

  provisioner "file" {
    source      = var.rpm
    destination = "/home/ec2-user/joiner.rpm"
  }

  # Install the package (binary, units, /etc/default/joiner,
  # /etc/joiner/bootstrap.json) and enable both units: bootstrap runs before
  # kubelet on every boot, the agent after it. xfsprogs and mdadm back the
  # data-volume layout.
  provisioner "shell" {
    inline = [
      "set -eux",
      "if command -v dnf >/dev/null; then sudo dnf install -y xfsprogs mdadm /home/ec2-user/joiner.rpm; else sudo yum install -y xfsprogs mdadm /home/ec2-user/joiner.rpm; fi",
      "sudo systemctl daemon-reload",
      "sudo systemctl enable joiner-bootstrap.service joiner-agent.service",
      "/usr/bin/joiner version",
      "sudo systemd-analyze verify /usr/lib/systemd/system/joiner-bootstrap.service /usr/lib/systemd/system/joiner-agent.service",
      "rm -f /home/ec2-user/joiner.rpm",
    ]
  }

  post-processor "manifest" {
    output     = "dist/packer-manifest.json"
    strip_path = true
  }
}
