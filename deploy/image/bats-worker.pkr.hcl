# Packer template: an EC2 AMI with the BaTS worker baked in (Ubuntu 24.04, any architecture).
#
#   make worker-wheel                                 # in the repository: dist/bats_worker-*.whl
#   packer init deploy/image/bats-worker.pkr.hcl
#   packer build -var region=eu-west-1 -var wheel=dist/bats_worker-0.1.0-py3-none-any.whl deploy/image/bats-worker.pkr.hcl
#
# Put the AMI id it prints in your cluster's `image` key. Instances then need only the built-in
# user data of the ec2 provisioner, which starts the bats-worker unit.
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
  default = "us-east-1"
}

variable "instance_type" {
  type    = string
  default = "t3.small"
}

variable "arch" {
  type    = string
  default = "amd64" # or arm64 (then a Graviton instance_type, e.g. t4g.small)
}

variable "wheel" {
  type        = string
  description = "the worker wheel to install (make worker-wheel), e.g. dist/bats_worker-0.1.0-py3-none-any.whl"
}

source "amazon-ebs" "bats_worker" {
  region        = var.region
  instance_type = var.instance_type
  ssh_username  = "ubuntu"
  ami_name      = "bats-worker-{{timestamp}}"
  source_ami_filter {
    filters = {
      name                = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${var.arch}-server-*"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["099720109477"] # Canonical
    most_recent = true
  }
  tags = {
    Name = "bats-worker"
  }
}

build {
  sources = ["source.amazon-ebs.bats_worker"]

  provisioner "file" {
    source      = var.wheel
    destination = "/tmp/${basename(var.wheel)}"
  }
  provisioner "file" {
    source      = "${path.root}/../bats-worker.service"
    destination = "/tmp/bats-worker.service"
  }
  provisioner "file" {
    source      = "${path.root}/install-worker.sh"
    destination = "/tmp/install-worker.sh"
  }
  provisioner "shell" {
    inline = ["sudo sh /tmp/install-worker.sh /tmp/${basename(var.wheel)} /tmp/bats-worker.service"]
  }
}
