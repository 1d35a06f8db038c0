//
// Copyright (c) 2024, 2026 Oracle and/or its affiliates. All rights reserved.
//
// Licensed under the Universal Permissive License v 1.0 as shown at
//  https://oss.oracle.com/licenses/upl/
//
pub(crate) mod authentication_provider;
pub(crate) mod config_file_authentication_provider;
pub(crate) mod file_utils;
pub(crate) mod http_signature;
pub(crate) mod instance_principal_auth_provider;
pub(crate) mod oke_workload_identity_auth_provider;
pub(crate) mod private_key_supplier;
pub(crate) mod resource_principal_auth_provider;
pub(crate) mod signer;
pub(crate) mod simple_authentication_provider;
